"""The tree on disk as ``fix --apply`` and ``--revert`` change it: folders reached without following a
link and files replaced atomically (:mod:`~auditor.workspace.folder`), the lock and the signals held
back (:mod:`~auditor.workspace.lock`), the backups (:mod:`~auditor.workspace.backup`), and the two
transactions (:mod:`~auditor.workspace.transaction`). Below orchestration: it writes the bytes it is
given and knows no rule, plan or scan."""
