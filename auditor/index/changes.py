"""Module-level changes to the members of classes, as the summary pass follows them.

:class:`MemberChangesMixin`, a part of :class:`auditor.index.summary._Summarizer`: ``Cls.m = v``,
``del Cls.m``, ``setattr(Cls, "m", v)``/``delattr`` after a class statement, through a loop target
or the module object, applied to the class's :class:`~auditor.index.facts.ClassFact` when followed,
else recorded as not followed (on the class, or as a foreign change).
"""

from __future__ import annotations

import ast

from auditor.index.facts import ITEMS_OF, ClassFact
from auditor.index.methods import attr_fact, method_fact
from auditor.index.syntax import dotted, node_text, walk


class MemberChangesMixin:
    """The member changes of the summariser (a mixin of :class:`auditor.index.summary._Summarizer`,
    whose state it reads and writes: ``s`` the summary being built, ``loop_iters``, ``_fn_nodes``,
    ``_seen``, ``_mark``, ``_namespace_of``)."""

    def _class_for(self, name: str) -> ClassFact | None:
        """The class this module's name ``name`` is bound to now, when it is defined here
        (through plain aliases ``Alias = Cls`` of this module too)."""
        for _ in range(10):
            b = self.s.bindings.get(name)
            if b is not None and b.kind == "class":
                return self.s.classes.get(b.target)
            if b is None or b.kind != "alias" or "." in b.target:
                return None
            name = b.target
        return None

    def _loop_change(self, cname: str, member: str, construct: str, line: int, setting: bool = False,
                     value: ast.expr | None = None) -> bool:
        """A member change whose head is a module-level ``for`` target (``for c in (A, B): del
        c.m``): for each class the iterable names (a literal of names) an assignment
        (``setting``, of ``value``) is made as :meth:`_set_member` makes it, any other change is
        recorded, not followed; for an iterable computed at run time, on every class of this
        module and on the iterable as a computed head. False when the head is no loop target."""
        first, _, rest = cname.partition(".")
        it = self.loop_iters.get(first)
        if it is None:
            return False
        elts = it.elts if isinstance(it, (ast.Tuple, ast.List, ast.Set)) else []
        heads = [dotted(e) for e in elts]
        if not heads or None in heads:
            # an iterable computed at run time: any class of this module may be among its items
            heads = [n.id for n in walk(it) if isinstance(n, ast.Name)]
            self.s.foreign_changes.append((ITEMS_OF + node_text(it)[:100] + (f".{rest}" if rest else ""), member,
                                           construct, line))
            for c in self.s.classes.values():
                c.unfollowable.append((member, construct, line))
        for h in heads:
            full = f"{h}.{rest}" if rest else h
            cf = self._class_for(full) if "." not in full else None
            if setting and elts and h.split(".")[0] not in self.loop_iters:
                self._set_member(full, member, value, construct, line)
            elif cf is not None:
                cf.unfollowable.append((member, construct, line))
            else:
                self.s.foreign_changes.append((full, member, construct, line))
        return True

    def _self_change(self, cname: str, member: str, construct: str, line: int) -> bool:
        """A module-level change through a name bound to this module's object (``from . import
        llama as _me; del _me.X``): the name ``member`` is marked; False for any other head."""
        if "." in cname or self._namespace_of(ast.Name(cname), "module") != "module":
            return False
        self._mark(member, f"`{construct}` (line {line}), a write through the module object", line)
        return True

    def _remove_member(self, cname: str, member: str, construct: str, line: int) -> None:
        if self._loop_change(cname, member, construct, line) or self._self_change(cname, member, construct, line):
            return
        cf = self._class_for(cname)
        if cf is None:
            self.s.foreign_changes.append((cname, member, construct, line))
            return
        cf.methods.pop(member, None)
        cf.attrs.pop(member, None)
        cf.removed[member] = (construct, line)

    def _set_member(self, cname: str, member: str, value: ast.expr | None, construct: str, line: int) -> None:
        """``Cls.member = value`` (or ``setattr``) after the class: followed when the value is a
        constant, a literal, a method of another class of this module, or ``staticmethod(f)`` /
        ``classmethod(f)`` of a function of this module; else recorded as a change the index
        cannot follow."""
        if self._loop_change(cname, member, construct, line, True, value) \
                or self._self_change(cname, member, construct, line):
            return
        if member in ("__bases__", "__class__"):
            # the class's bases (its MRO) or its metaclass replaced: any member may change
            member, value = "*", None
        cf = self._class_for(cname)
        if cf is None:
            self.s.foreign_changes.append((cname, member, construct, line))
            return
        if member != "*" and isinstance(value, (ast.Constant, ast.Dict, ast.List, ast.Tuple, ast.Set)):
            cf.attrs[member] = attr_fact(member, line, value)
            cf.methods.pop(member, None)
            return
        if member != "*" and isinstance(value, ast.Call) and dotted(value.func) in ("staticmethod", "classmethod") \
                and len(value.args) == 1 and not value.keywords and isinstance(value.args[0], ast.Name) \
                and value.args[0].id in self._fn_nodes and self.s.bindings.get(value.args[0].id) is not None \
                and self.s.bindings[value.args[0].id].kind == "function":
            # the module's function, made a static or class method of the class: followed as one
            mf = method_fact(self._fn_nodes[value.args[0].id])
            mf.name, mf.line, mf.decorators = member, line, [dotted(value.func)] + mf.decorators
            cf.methods[member] = mf
            cf.attrs.pop(member, None)
            return
        d = dotted(value) if value is not None else None
        if d is not None and d.count(".") == 1:
            other = self._class_for(d.split(".")[0])
            mf = other.methods.get(d.split(".")[1]) if other is not None else None
            if mf is not None:
                cf.methods[member] = mf
                cf.attrs.pop(member, None)
                return
        cf.unfollowable.append((member, construct, line))

    def _mutation_call(self, call: ast.Call, line: int) -> None:
        """``setattr(Cls, "m", v)`` / ``delattr(Cls, "m")`` at module level."""
        fn = dotted(call.func)
        if fn not in ("setattr", "delattr") or not call.args or dotted(call.args[0]) is None:
            return
        self._seen.add(id(call))
        cname = dotted(call.args[0])
        key = call.args[1] if len(call.args) > 1 else None
        construct = f"{node_text(call)[:80]}"
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            if self._loop_change(cname, "*", construct, line) or self._self_change(cname, "*", construct, line):
                return
            cf = self._class_for(cname)
            if cf is not None:
                cf.unfollowable.append(("*", construct, line))
            else:
                self.s.foreign_changes.append((cname, "*", construct, line))
            return
        if fn == "delattr":
            self._remove_member(cname, key.value, construct, line)
        else:
            self._set_member(cname, key.value, call.args[2] if len(call.args) > 2 else None, construct, line)
