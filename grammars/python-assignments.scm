; Plain assignments `target = value` (chains `a = b = v` match once per target).
(assignment
  left: (_) @assign.target
  right: (_) @assign.value) @assign

; Augmented assignments `target op= value`.
(augmented_assignment
  left: (_) @update.target
  operator: _ @update.operator
  right: (_) @update.value) @update
