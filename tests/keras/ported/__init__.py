"""Keras 3's own test files for the layers that ``rnnfast.keras`` claims, ported to run on it
(issue 38 item 4): each test function of a Keras file has a function of the same name in
``test_<name>.py`` here, with the same inputs and the expected values copied from Keras's file,
or is listed below as not applicable, with the reason. ``test_counts.py`` checks this listing
against the installed Keras files and the ports, and the table against the listing.

Counts (Keras 3.15; "partly refused": the test passes, and a part of it that the front does not
support is a test that the front refuses it with an error naming the argument):

=========================== ===== ===== ============== ======= ===
Keras file                  tests pass  partly refused refused n/a
=========================== ===== ===== ============== ======= ===
simple_rnn_test.py              5     4              1       0   0
gru_test.py                     9     6              1       0   2
lstm_test.py                    5     4              1       0   0
bidirectional_test.py          13     9              1       0   3
time_distributed_test.py       11     9              0       2   0
masking_test.py                 3     1              1       1   0
total                          46    33              5       3   5
=========================== ===== ===== ============== ======= ===
"""

PASS, PARTLY, REFUSED, NA = "pass", "partly refused", "refused", "n/a"

# Keras file -> {test function: (status, what is refused or why it does not apply)}
PORTED = {
    "simple_rnn_test.py": {
        "test_basics": (PARTLY, "kernel/recurrent/bias_regularizer (no regularization losses)"),
        "test_correctness": (PASS, ""),
        "test_statefulness": (PASS, ""),
        "test_pass_initial_state": (PASS, ""),
        "test_masking": (PASS, ""),
    },
    "gru_test.py": {
        "test_basics": (PARTLY, "kernel/recurrent/bias_regularizer (no regularization losses)"),
        "test_correctness": (PASS, ""),
        "test_statefulness": (PASS, ""),
        "test_pass_initial_state": (PASS, ""),
        "test_pass_return_state": (PASS, ""),
        "test_masking": (PASS, ""),
        "test_legacy_implementation_argument": (PASS, ""),
        "test_stateful_with_symbolic_batch_size": (
            NA,
            "TensorFlow only (a tf.function with a symbolic batch); its eager half is ported",
        ),
        "test_torch_cudnn_dispatch_fires": (NA, "spies on torch._VF.gru on a CUDA device"),
    },
    "lstm_test.py": {
        "test_basics": (PARTLY, "kernel/recurrent/bias_regularizer (no regularization losses)"),
        "test_correctness": (PASS, ""),
        "test_statefulness": (PASS, ""),
        "test_pass_initial_state": (PASS, ""),
        "test_masking": (PASS, ""),
    },
    "bidirectional_test.py": {
        "test_basics": (PASS, ""),
        "test_correctness": (PASS, ""),
        "test_statefulness": (PASS, ""),
        "test_pass_initial_state": (PASS, ""),
        "test_masking": (PASS, ""),
        "test_return_state": (PASS, ""),
        "test_output_shape": (PASS, ""),
        "test_keeps_use_cudnn": (PARTLY, "use_cudnn=True (no cuDNN on the CPU)"),
        "test_fused_lstm_eligibility": (NA, "Keras's private _can_attempt_fused_lstm (cuDNN)"),
        "test_fused_lstm_matches_unfused": (PASS, ""),
        "test_fused_gru_eligibility": (NA, "Keras's private _can_attempt_fused_gru (cuDNN)"),
        "test_fused_gru_matches_unfused": (PASS, ""),
        "test_torch_cudnn_bidirectional_gru_dispatch_fires": (
            NA,
            "spies on torch._VF.gru on a CUDA device",
        ),
    },
    "time_distributed_test.py": {
        "test_basics": (PASS, ""),
        "test_build": (REFUSED, "a Keras Conv2D inside TimeDistributed (Dense / Dropout only)"),
        "test_correctness": (PASS, ""),
        "test_masking": (REFUSED, "a user's keras.layers.Wrapper inside TimeDistributed"),
        "test_with_mask_zero": (PASS, ""),
        "test_mask_validation_with_mismatched_timesteps": (PASS, ""),
        "test_mask_validation_with_mismatched_batch_size": (PASS, ""),
        "test_mask_validation_with_correct_shape": (PASS, ""),
        "test_mask_validation_with_3d_mask": (PASS, ""),
        "test_mask_validation_with_none_mask": (PASS, ""),
        "test_mask_validation_with_both_batch_and_timesteps_mismatched": (PASS, ""),
    },
    "masking_test.py": {
        "test_masking_basics": (PASS, ""),
        "test_masking_correctness": (PARTLY, "a user's keras.layers.Layer in the Sequential"),
        "test_masking_with_tensor": (
            REFUSED,
            "model.save of a Masking to .keras (the writer names the layer); the reload is "
            "checked once the writer covers it",
        ),
    },
}
