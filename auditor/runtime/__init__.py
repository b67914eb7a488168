"""Running the real engine, on purpose: the machinery of ``eagle-audit verify``.

Everything else in eagle-audit reads trees as bytes and never runs them. This package is the one
exception, and it runs the engine only in a child process with the interpreter of an environment
the user named (``--python``, ``VIRTUAL_ENV``, or the current one), never a downloaded archive:

- :mod:`auditor.runtime.configs`: tiny config-only model folders (a shrunk target config, a
  matching EAGLE-3 drafter config), pure functions on dicts;
- :mod:`auditor.runtime.child`: the child process (temporary folder, time limit, process group
  killed on time-out, the result read as bounded JSON);
- :mod:`auditor.runtime.attribution`: which gate an engine exception belongs to, by where it was
  raised;
- ``engine_child.py``: the script the child runs in the engine's environment (never imported).
"""
