; What porter reads inside one host function.

; Calls by name: allocations, copies, launch APIs, removed or unified-memory APIs.
(call_expression
  function: (identifier) @call.name
  arguments: (argument_list) @call.args) @call
(call_expression
  function: (template_function name: (identifier) @call.name)
  arguments: (argument_list) @call.args) @call

; <<<grid, block, shared, stream>>> launches.
(call_expression
  function: (_) @launch.kernel
  (kernel_call_syntax) @launch.config
  arguments: (argument_list) @launch.args) @launch

; new T[n]
(new_expression
  type: (_) @new.type
  declarator: (new_declarator length: (_) @new.length)) @new

; Scalar declarations and assignments: `int n = 1 << 20;`, `dim3 block(16, 16);`, `n = atoi(s);`.
(declaration declarator: (init_declarator declarator: (identifier) value: (_))) @decl
; A function pointer set where it is declared: `void (*fp)(float*, int) = kernel;` (a launch through it
; launches that kernel).
(declaration declarator: (init_declarator declarator: (function_declarator) value: (_))) @decl
(assignment_expression left: (identifier) @assign.var right: (_) @assign.value) @assign
; `dim3 block(THREADS);` parses as a function declaration (C++'s most vexing parse); inside a
; function body it is a construction.
(declaration
  type: (type_identifier) @ctor.type
  declarator: (function_declarator
    declarator: (identifier) @ctor.var
    parameters: (parameter_list) @ctor.args)) @ctor

; Argument arrays for cudaLaunchKernel: `void* args[] = {&a, &n};`
(init_declarator
  declarator: [(array_declarator) (pointer_declarator)] @array
  value: (initializer_list) @array.values)

; Member accesses (removed cudaDeviceProp fields) and namespace-qualified names.
(field_expression field: (field_identifier) @field)
(qualified_identifier scope: (namespace_identifier) @scope) @qualified

; Types named in declarations and template types (texture objects, texture<>).
(template_type name: (type_identifier) @type)
(declaration type: (type_identifier) @type)
(parameter_declaration type: (type_identifier) @type)

; Inline assembly in host code.
(gnu_asm_expression) @asm
