# mypy only (see [tool.mypy] in pyproject.toml): porter.backends and porter.grammars are installed from
# backends/ and grammars/ through setuptools' package-dir, which the editable install maps with an import
# hook that mypy cannot follow.  This folder links them under their import names; `porter` itself is
# always checked from porter/, so this stub is never read in its place.
