; Candidate accumulation statements.  Each pattern names the operator it accumulates with;
; the scanner then checks that the accumulator appears exactly once among the operands and
; that the other operands do not read it.

; acc OP= value, with an associative (and commutative) operator
(augmented_assignment
  left: (_) @reduce.target
  operator: ["+=" "*=" "|=" "&=" "^="] @reduce.operator
  right: (_) @reduce.value) @reduce.augmented

; acc = acc OP value  /  acc = value OP acc  (a chain of the same operator is flattened)
(assignment
  left: (_) @reduce.target
  right: (binary_operator
    operator: ["+" "*" "|" "&" "^"] @reduce.operator) @reduce.value) @reduce.binary

; acc = max(acc, value)
(assignment
  left: (_) @reduce.target
  right: (call
    function: (_) @reduce.function
    arguments: (argument_list)) @reduce.value
  (#match? @reduce.function "^(max|(np|numpy)[.](maximum|fmax)|math[.]fmax)$")) @reduce.max

; acc = min(acc, value)
(assignment
  left: (_) @reduce.target
  right: (call
    function: (_) @reduce.function
    arguments: (argument_list)) @reduce.value
  (#match? @reduce.function "^(min|(np|numpy)[.](minimum|fmin)|math[.]fmin)$")) @reduce.min

; if value > acc: acc = value   (max; the comparison's direction decides max or min)
(if_statement
  condition: (comparison_operator) @reduce.condition
  consequence: (block
    .
    (expression_statement
      (assignment
        left: (_) @reduce.target
        right: (_) @reduce.value))
    .)
  !alternative) @reduce.select
