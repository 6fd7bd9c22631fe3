"""The sentiment workload: LSTM classifier, data loader, trainer, checkpoints, evaluation."""
