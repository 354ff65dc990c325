; Top-level structure of a CUDA translation unit.  porter.scan.cuda runs this query with a max
; start depth of 1 on the translation unit and then on each container it reports (namespace and
; extern "C" bodies, #if / #ifdef / #else blocks), so the cursor never walks function bodies.

; Containers to visit next.
(namespace_definition body: (declaration_list) @container)
(linkage_specification body: (declaration_list) @container)
(preproc_if) @container
(preproc_ifdef) @container
(preproc_else) @container
(preproc_elif) @container
; A block at namespace scope: how porter.scan.macros.masked writes a scope macro too short to
; spell `namespace{` (`NS_BEGIN`).
(compound_statement) @container

; Function definitions: kernels, device and host functions, templates, methods of structs.
(function_definition) @function
(template_declaration (function_definition) @function)
(linkage_specification (function_definition) @function)
(struct_specifier body: (field_declaration_list (function_definition) @function))
(class_specifier body: (field_declaration_list (function_definition) @function))
(template_declaration (struct_specifier body: (field_declaration_list (function_definition) @function)))
(template_declaration (class_specifier body: (field_declaration_list (function_definition) @function)))

; Object-like and function-like macros.
(preproc_def name: (identifier) @define.name) @define
(preproc_function_def name: (identifier) @define.name) @define

; #include <...> / "..."
(preproc_include path: (_) @include)

; Declarations: globals, prototypes, texture references.
(declaration) @global

; `namespace cg = cooperative_groups;` and `using namespace cooperative_groups;`
(namespace_alias_definition name: (namespace_identifier) @alias.name) @alias
(using_declaration) @using
