"""What rnnfast's composed layers and training paths cost: stacks, masks, dilation, JordanRNN,
the fused Embedding -> RNN, and fit on variable-length data against a hand-written loop."""
