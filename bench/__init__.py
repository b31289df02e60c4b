"""cusoftmax benchmarks: ``python -m bench <suite>`` (see bench/README.md).

Modules: ``_timing`` (the one timer: CUDA events, L2 flush, median),
``_providers`` (the one registry of implementations), ``_cases`` (shape lists
and input arrays), ``_suites`` (the one runner), ``_report`` (the one writer:
JSON, CSV, markdown with targets, PNG plots), ``_triton_softmax`` (the Triton
tutorial peer), ``_selftest`` (the report path on synthetic rows).
"""
