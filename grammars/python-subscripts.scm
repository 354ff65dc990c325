; Subscripted accesses a[i], a[i, j], a[i][j] (a chain a[i][j] matches twice: the scanner
; keeps the outermost subscript and reads the indices of the whole chain).
(subscript
  value: (_) @subscript.value) @subscript
