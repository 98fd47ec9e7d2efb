"""The examples' whole training runs against their PyTorch twins (same data, model,
hyper-parameters): time and accuracy."""
