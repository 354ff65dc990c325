"""`porter lift`: Python loop nests as GPU kernels, validated against the Python itself.

analyze (ast -> patterns and kernels, or refusals) -> kernels/emit (CUDA text) -> hostexpr (a plan for
given arguments) -> validate (the reference in a sandboxed child, every device's run in another) ->
dropin (the generated module).  porter.workflows.lift composes them.
"""
