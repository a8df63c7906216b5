"""The packed-kv kernels over py-harness's case matrix, on every runtime selected with
--runtime: each case runs on the GPU and is judged against the float64 reference; a case
the variant does not support (its `supports`, `max_head_dim`) or a driver cannot run is
skipped with the reason."""


def test_case(run_case, matrix_case):
    run_case(matrix_case)
