; What porter reads inside one __global__ or __device__ function.

; Calls by name: barriers, atomics, warp intrinsics, device helpers, texture fetches.
(call_expression
  function: (identifier) @call.name
  arguments: (argument_list) @call.args) @call
(call_expression
  function: (template_function name: (identifier) @call.name)
  arguments: (argument_list) @call.args) @call

; Method calls: `block.sync()`, `grid.sync()`.
(call_expression
  function: (field_expression field: (field_identifier) @method.name)) @method

; Namespace-qualified names: cg::this_thread_block(), cuda::std::atomic<int>.
(qualified_identifier scope: (namespace_identifier) @scope) @qualified

; Stores: `p[i] = v`, `p[i] += v`, `*p = v`, `p->f = v`, `p[i]++`.
(assignment_expression left: (_) @store) @assign
(update_expression argument: (_) @store)

; Shared memory declarations (static and extern).
(declaration (type_qualifier "__shared__")) @shared

; Local pointer variables initialised from an expression: candidate aliases of parameters.
(init_declarator declarator: (pointer_declarator) @alias.declarator value: (_) @alias.value)

; Local scalars: thread-derived indices (`int t = threadIdx.x;`), mask and warp-size constants.
(init_declarator declarator: (identifier) @local.name value: (_) @local.value)

; Loops whose counter starts at 16 (a shuffle-reduction ladder written for 32 lanes).
(for_statement
  initializer: (declaration declarator: (init_declarator
    declarator: (identifier) @ladder.var
    value: (number_literal) @ladder.start))) @ladder

; Lane / warp arithmetic and comparisons with a literal.
; The regex only pre-filters candidates; porter/scan/hazards.toml decides which pairs count.
(binary_expression
  right: (number_literal) @binary.literal
  (#match? @binary.literal "^(32|31|5|0[xX]1[fF])[uUlL]*$")) @binary

; Kernel launches from device code (dynamic parallelism).
(call_expression (kernel_call_syntax)) @launch

; Inline PTX.
(gnu_asm_expression) @asm

; Types named in declarations: texture objects, cooperative-groups types.
(template_type name: (type_identifier) @type)
(declaration type: (type_identifier) @type)
(parameter_declaration type: (type_identifier) @type)
