; Every function definition: module functions, methods and nested functions.
; The scanner qualifies the name (Class.method, outer.<locals>.inner) from the ancestors.
(function_definition
  name: (identifier) @function.name
  parameters: (parameters) @function.params
  body: (block) @function.body) @function
