; `for v in range(...)` loops, the loops porter can lift (numba's `prange` counts as `range`).
; `while` loops and `for x in some_list` are not matched: they are never the loop of a nest.
(for_statement
  left: (identifier) @loop.var
  right: (call
    function: (_) @loop.range
    arguments: (argument_list) @loop.bounds)
  body: (block) @loop.body
  (#match? @loop.range "^(range|prange|([A-Za-z_][A-Za-z_0-9]*[.])+prange)$")) @loop
