"""The dynamic load balancer: pure split arithmetic, the trainer hooks, and its options."""
