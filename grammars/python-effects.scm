; Statements that leave a loop before its last iteration.
(break_statement) @exit.break
(return_statement) @exit.return
(raise_statement) @exit.raise
(yield) @exit.yield

; Method calls: a call may change its receiver (out.append(x), rng.random()).
(call
  function: (attribute
    object: (_) @call.receiver
    attribute: (identifier) @call.method)) @call.method_call

; Built-ins whose effect depends on the order of the calls.
(call
  function: (identifier) @call.builtin
  (#any-of? @call.builtin "print" "input" "next" "open" "exec")) @call.ordered
