"""The recurrent layers: RNN (``rnn``, with ``RecurrentLayer``, the machinery every recurrent
layer shares), GRU and LSTM (``gated``) and their one-step cells (``gated_cells``),
DeepTransitionRNN (``deep_transition``), JordanRNN (``jordan``); the cell descriptions and their
registry (``cells``); the stack runner (``stack``) and dilation (``dilation``, ``rnn_rings``);
the options (``rnn_options``), API forms (``rnn_forms``), one step at a time
(``rnn_streaming``), the summary (``rnn_summary``) and torch's layout (``rnn_torch``).
``rnnfast.nn`` re-exports the layers."""
