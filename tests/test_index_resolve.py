"""auditor.index.summary (module summaries) and auditor.index.resolve (names, C3 MRO, lookup) on synthetic code.

The last tests cross-check the static MRO against Python's own ``__mro__`` on a synthetic package
written here (our own code, no torch), imported in the test process.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from auditor.index.facts import AttrFact, MethodFact
from auditor.index.resolve import Resolver
from auditor.index.summary import summarize
from auditor.index.syntax import resolve_relative
from auditor.index.targets import ClassRef, External, ModuleRef, Unresolved
from auditor.index.tree import SummaryCache, Tree
from auditor.source.folder import FolderSource


def summ(src: str, path: str = "vllm/m.py"):
    return summarize(textwrap.dedent(src).encode(), path)


def build(tmp_path: Path, files: dict[str, str]) -> Resolver:
    """A Resolver over a folder holding ``vllm/__init__.py`` plus ``files``."""
    root = tmp_path / "tree"
    for rel, src in {"vllm/__init__.py": "", **files}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(src))
    return Resolver(Tree(FolderSource(root), SummaryCache(enabled=False)))


def mro_names(r: Resolver, t) -> list[str]:
    assert isinstance(t, ClassRef), t
    res = r.mro(t)
    assert res.error is None, res.error
    assert res.unresolved == [], res.unresolved
    return [e.dotted for e in res.entries]


# -- index: stubs, empty classes, attributes ----------------------------------------------


def test_stub_detection():
    s = summ('''
        class K:
            def a(self): ...
            def b(self): pass
            def c(self):
                """doc only"""
            def d(self):
                raise NotImplementedError
            def e(self):
                """doc"""
                raise NotImplementedError("subclasses implement this")
            def h(self):
                """doc"""
                ...
            def f(self):
                """doc"""
                return 1
            def g(self):
                raise ValueError("not a stub")
            def i(self):
                x = 1
    ''')
    methods = s.classes["K"].methods
    assert {n for n, m in methods.items() if m.is_stub} == {"a", "b", "c", "d", "e", "h"}
    assert {n for n, m in methods.items() if not m.is_stub} == {"f", "g", "i"}


def test_empty_class_detection():
    s = summ('''
        class Base: ...
        class E1(Base): pass
        class E2(Base):
            """only a docstring"""
        class E3(Base): ...
        class E4(Base):
            """doc"""
            pass
        class N1(Base):
            x = 1
        class N2(Base):
            def f(self): ...
        class N3(Base):
            class Inner: pass
    ''')
    empty = {n for n, c in s.classes.items() if c.empty}
    assert empty == {"Base", "E1", "E2", "E3", "E4", "N3.Inner"}
    assert s.classes["E1"].bases == ["Base"]


def test_annotation_only_names_are_not_attributes(tmp_path):
    r = build(tmp_path, {"vllm/m.py": '''
        from typing import ClassVar
        class P:
            x: int
            y: int = 3
            z: ClassVar[bool] = True
            def meth(self): ...
        class Q(P):
            pass
    '''})
    p = r.resolve_name("vllm.m", "P")
    c = r.cls(p)
    assert c.attrs["x"].has_value is False
    assert c.attrs["y"].has_value is True and c.attrs["y"].literal == 3
    assert c.attrs["z"].literal is True
    q = r.resolve_name("vllm.m", "Q")
    assert r.lookup(q, "x") is None
    owner, fact = r.lookup(q, "y")
    assert owner == p and isinstance(fact, AttrFact) and fact.value == "3"
    owner, fact = r.lookup(q, "meth")
    assert owner == p and isinstance(fact, MethodFact) and fact.is_stub
    assert r.lookup(q, "missing") is None


def test_method_overrides_attribute_and_back():
    s = summ('''
        class K:
            a = 1
            def a(self): ...
            def b(self): ...
            b = None
    ''')
    c = s.classes["K"]
    assert "a" in c.methods and "a" not in c.attrs
    assert "b" in c.attrs and "b" not in c.methods


def test_parse_error_is_one_line_and_no_facts():
    s = summ("class A(:\n    pass\n")
    assert s.error is not None and s.error.startswith("line 1:")
    assert "\n" not in s.error
    assert s.classes == {} and s.bindings == {}


# -- names -------------------------------------------------------------------------------


def test_type_checking_only_names_are_unresolvable(tmp_path):
    r = build(tmp_path, {
        "vllm/impl.py": "class Thing: pass\nclass Thing2: pass\nclass Thing3: pass\n",
        "vllm/tc.py": '''
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from vllm.impl import Thing
                class OnlyTyping: pass
            else:
                from vllm.impl import Thing3
            if not TYPE_CHECKING:
                from vllm.impl import Thing2
            class User(Thing): pass
        ''',
    })
    s = r.tree.module("vllm.tc")
    assert {"Thing", "OnlyTyping"} <= s.type_checking_names
    assert "Thing" not in s.bindings
    for name in ("Thing", "OnlyTyping"):
        t = r.resolve_name("vllm.tc", name)
        assert isinstance(t, Unresolved), t
        assert "TYPE_CHECKING" in t.reason
    assert r.resolve_name("vllm.tc", "Thing2") == ClassRef("vllm.impl", "Thing2")
    assert r.resolve_name("vllm.tc", "Thing3") == ClassRef("vllm.impl", "Thing3")
    user = r.mro(r.resolve_name("vllm.tc", "User"))
    assert [u.text for u in user.unresolved] == ["vllm.tc.Thing"]
    assert r.tree.module("vllm.tc").classes["OnlyTyping"].type_checking is True


def test_later_binding_wins(tmp_path):
    r = build(tmp_path, {
        "vllm/impl.py": "class Thing:\n    t = 1\n",
        "vllm/m.py": '''
            from vllm.impl import Thing as A
            class A:
                first = 1
            class A:
                second = 2

            class B:
                pass
            B = A

            class C:
                pass
            from vllm.impl import Thing as C
        ''',
    })
    s = r.tree.module("vllm.m")
    a = r.resolve_name("vllm.m", "A")
    assert a == ClassRef("vllm.m", "A")
    assert s.bindings["A"].line == 5
    assert r.location(a) == ("vllm/m.py", 5)
    assert r.lookup(a, "second") is not None and r.lookup(a, "first") is None
    assert r.resolve_name("vllm.m", "B") == ClassRef("vllm.m", "A")
    assert r.resolve_name("vllm.m", "C") == ClassRef("vllm.impl", "Thing")


def test_try_except_import_error(tmp_path):
    r = build(tmp_path, {
        "vllm/fast.py": "class Impl: pass\n",
        "vllm/slow.py": "class Impl: pass\n",
        "vllm/both.py": '''
            try:
                from vllm.fast import Impl
            except ImportError:
                from vllm.slow import Impl
            class User(Impl): pass
        ''',
        "vllm/fallback.py": '''
            try:
                from vllm.not_built import Impl
            except ImportError:
                from vllm.slow import Impl
        ''',
        "vllm/ext.py": '''
            try:
                import some_accelerator as acc
            except ImportError:
                acc = None
        ''',
    })
    assert r.resolve_name("vllm.both", "Impl") == ClassRef("vllm.fast", "Impl")
    assert mro_names(r, r.resolve_name("vllm.both", "User")) == ["vllm.both.User", "vllm.fast.Impl", "object"]
    # the first import names a module the tree lacks: the except branch's import is what runs
    assert r.resolve_name("vllm.fallback", "Impl") == ClassRef("vllm.slow", "Impl")
    assert r.resolve_name("vllm.ext", "acc") == External("some_accelerator")
    assert r.tree.module("vllm.both").bindings["Impl"].guarded is True


def test_resolve_relative_values():
    assert resolve_relative("vllm.a.b.c", False, 1, "d") == "vllm.a.b.d"
    assert resolve_relative("vllm.a.b.c", False, 2, None) == "vllm.a"
    assert resolve_relative("vllm.a.b.c", False, 3, "x") == "vllm.x"
    assert resolve_relative("vllm.a.b", True, 1, "c") == "vllm.a.b.c"
    assert resolve_relative("vllm.a.b", True, 2, None) == "vllm.a"
    assert resolve_relative("vllm.a.b", False, 0, "torch.nn") == "torch.nn"


def test_relative_imports(tmp_path):
    r = build(tmp_path, {
        "vllm/pkg/__init__.py": "from .impl import Thing\n",
        "vllm/pkg/impl.py": "class Thing: pass\nclass Other: pass\n",
        "vllm/pkg/sub/__init__.py": "from .sibling import S\n",
        "vllm/pkg/sub/sibling.py": "class S: pass\n",
        "vllm/pkg/sub/mod.py": '''
            from .. import impl
            from .. import Thing
            from ..impl import Other as O2
            from . import sibling
            from .sibling import S
            from ... import pkg
            class UsesModule(impl.Other): pass
            class UsesPkg(pkg.impl.Thing, sibling.S): pass
        ''',
    })
    m = "vllm.pkg.sub.mod"
    assert r.resolve_name(m, "impl") == ModuleRef("vllm.pkg.impl")
    assert r.resolve_name(m, "Thing") == ClassRef("vllm.pkg.impl", "Thing")
    assert r.resolve_name(m, "O2") == ClassRef("vllm.pkg.impl", "Other")
    assert r.resolve_name(m, "sibling") == ModuleRef("vllm.pkg.sub.sibling")
    assert r.resolve_name(m, "S") == ClassRef("vllm.pkg.sub.sibling", "S")
    assert r.resolve_name(m, "pkg") == ModuleRef("vllm.pkg")
    assert r.resolve_name("vllm.pkg.sub", "S") == ClassRef("vllm.pkg.sub.sibling", "S")
    assert mro_names(r, r.resolve_name(m, "UsesModule")) == [f"{m}.UsesModule", "vllm.pkg.impl.Other", "object"]
    assert mro_names(r, r.resolve_name(m, "UsesPkg")) == [
        f"{m}.UsesPkg", "vllm.pkg.impl.Thing", "vllm.pkg.sub.sibling.S", "object"]


def test_import_as_and_dotted_imports(tmp_path):
    r = build(tmp_path, {
        "vllm/pkg/__init__.py": "",
        "vllm/pkg/impl.py": "class Thing: pass\n",
        "vllm/m.py": '''
            import vllm.pkg.impl as impl_mod
            import vllm.pkg.impl
            import torch.nn as nn
            import torch
            class U(impl_mod.Thing): pass
            class V(vllm.pkg.impl.Thing): pass
            class W(nn.Module): pass
            class X(torch.nn.Module): pass
        ''',
    })
    assert r.resolve_name("vllm.m", "impl_mod") == ModuleRef("vllm.pkg.impl")
    assert r.resolve_name("vllm.m", "vllm") == ModuleRef("vllm")
    assert r.resolve_dotted("vllm.m", "vllm.pkg.impl.Thing") == ClassRef("vllm.pkg.impl", "Thing")
    assert r.bases(r.resolve_name("vllm.m", "U")) == [ClassRef("vllm.pkg.impl", "Thing")]
    assert r.bases(r.resolve_name("vllm.m", "V")) == [ClassRef("vllm.pkg.impl", "Thing")]
    assert r.bases(r.resolve_name("vllm.m", "W")) == [External("torch.nn.Module")]
    assert r.bases(r.resolve_name("vllm.m", "X")) == [External("torch.nn.Module")]


def test_reexport_through_init(tmp_path):
    r = build(tmp_path, {
        "vllm/pkg/__init__.py": "from vllm.pkg.inner import Thing as Thing\n__all__ = ['Thing']\n",
        "vllm/pkg/inner/__init__.py": "from .deep import *\n",
        "vllm/pkg/inner/deep.py": "__all__ = ['Thing']\nclass Thing: pass\n",
        "vllm/user.py": "from vllm.pkg import Thing\nclass Sub(Thing): pass\n",
    })
    assert r.resolve_name("vllm.user", "Thing") == ClassRef("vllm.pkg.inner.deep", "Thing")
    assert mro_names(r, r.resolve_name("vllm.user", "Sub")) == [
        "vllm.user.Sub", "vllm.pkg.inner.deep.Thing", "object"]
    assert r.tree.module("vllm.pkg").dunder_all == ["Thing"]


def test_lazy_getattr_module(tmp_path):
    r = build(tmp_path, {
        "vllm/lazy/__init__.py": '''
            import importlib
            from typing import TYPE_CHECKING

            _LAZY_MODULES = {"LazyThing": "vllm.lazy.impl", "Far": "vllm.far"}
            if TYPE_CHECKING:
                from vllm.lazy.impl2 import TcThing

            def __getattr__(name):
                if name in _LAZY_MODULES:
                    return getattr(importlib.import_module(_LAZY_MODULES[name]), name)
                if name == "TcThing":
                    from vllm.lazy.impl2 import TcThing
                    return TcThing
                raise AttributeError(name)
        ''',
        "vllm/lazy/impl.py": "class LazyThing: pass\n",
        "vllm/lazy/impl2.py": "class TcThing: pass\n",
        "vllm/far.py": "class Far: pass\n",
        "vllm/user.py": "from vllm.lazy import LazyThing, TcThing, Far\nclass U(LazyThing, TcThing, Far): pass\n",
    })
    assert r.resolve_name("vllm.lazy", "LazyThing") == ClassRef("vllm.lazy.impl", "LazyThing")
    assert r.resolve_name("vllm.lazy", "TcThing") == ClassRef("vllm.lazy.impl2", "TcThing")
    assert r.resolve_name("vllm.lazy", "Far") == ClassRef("vllm.far", "Far")
    assert mro_names(r, r.resolve_name("vllm.user", "U")) == [
        "vllm.user.U", "vllm.lazy.impl.LazyThing", "vllm.lazy.impl2.TcThing", "vllm.far.Far", "object"]


def test_factory_built_classes(tmp_path):
    r = build(tmp_path, {
        "vllm/base.py": "class Base:\n    def base_meth(self): return 1\n",
        "vllm/f.py": '''
            from vllm.base import Base

            class Mixin:
                def extra(self): return 2

            def make(cls):
                class W(cls, Mixin):
                    def wrapped(self): return 3
                return W

            class X(make(Base)):
                pass

            Y = make(Base)
        ''',
    })
    x = r.resolve_name("vllm.f", "X")
    assert mro_names(r, x) == ["vllm.f.X", "vllm.f.make.<locals>.W", "vllm.base.Base", "vllm.f.Mixin", "object"]
    w = r.resolve_name("vllm.f", "Y")
    assert isinstance(w, ClassRef) and w.qualname == "make.<locals>.W"
    assert dict(w.subst)["cls"] == ClassRef("vllm.base", "Base")
    assert r.cls(w).factory == ("make", ["cls"])
    assert r.lookup(x, "base_meth")[0] == ClassRef("vllm.base", "Base")
    assert r.lookup(x, "extra")[0] == ClassRef("vllm.f", "Mixin")
    assert r.lookup(x, "wrapped")[0].qualname == "make.<locals>.W"


def test_external_factory_is_unresolved(tmp_path):
    r = build(tmp_path, {"vllm/m.py": "from somewhere import build\nclass A(build(object)): pass\n"})
    res = r.mro(r.resolve_name("vllm.m", "A"))
    assert [e.dotted for e in res.entries] == ["vllm.m.A", "object"]
    assert len(res.unresolved) == 1 and "external" in res.unresolved[0].reason


def test_generic_and_external_bases(tmp_path):
    r = build(tmp_path, {"vllm/m.py": '''
        import typing
        from typing import Generic, TypeVar, Protocol
        from torch import nn
        from transformers import PretrainedConfig
        T = TypeVar("T")
        class G(Generic[T]): pass
        class G2(typing.Generic[T]): pass
        class H(G[int]): pass
        class M(nn.Module): pass
        class C(PretrainedConfig): pass
        class P(Protocol): pass
        class O(object): pass
    '''})
    g = r.resolve_name("vllm.m", "G")
    assert r.bases(g) == [External("typing.Generic")]
    assert mro_names(r, g) == ["vllm.m.G", "typing.Generic", "object"]
    assert mro_names(r, r.resolve_name("vllm.m", "G2")) == ["vllm.m.G2", "typing.Generic", "object"]
    assert mro_names(r, r.resolve_name("vllm.m", "H")) == ["vllm.m.H", "vllm.m.G", "typing.Generic", "object"]
    m = r.resolve_name("vllm.m", "M")
    assert r.bases(m) == [External("torch.nn.Module")]
    assert mro_names(r, m) == ["vllm.m.M", "torch.nn.Module", "object"]
    assert r.bases(r.resolve_name("vllm.m", "C")) == [External("transformers.PretrainedConfig")]
    assert mro_names(r, r.resolve_name("vllm.m", "P")) == ["vllm.m.P", "typing.Protocol", "typing.Generic", "object"]
    assert mro_names(r, r.resolve_name("vllm.m", "O")) == ["vllm.m.O", "object"]


def test_inconsistent_hierarchy_sets_error(tmp_path):
    src = '''
        class X: pass
        class Y: pass
        class A(X, Y): pass
        class B(Y, X): pass
        class C(A, B): pass
        class D(C): pass
    '''
    r = build(tmp_path, {"vllm/m.py": src})
    res = r.mro(r.resolve_name("vllm.m", "C"))
    assert res.error is not None and "consistent method resolution order" in res.error
    assert res.entries[0] == ClassRef("vllm.m", "C")
    # and Python agrees this hierarchy cannot exist
    with pytest.raises(TypeError, match="consistent method resolution"):
        exec(textwrap.dedent(src), {})
    # a subclass of the broken class does not crash either, and lookups still work
    d = r.resolve_name("vllm.m", "D")
    assert r.mro(d).entries[0] == d
    assert r.lookup(d, "nothing") is None


def test_inconsistent_hierarchy_in_a_tree_audit_does_not_crash(tmp_path):
    from conftest import add_registry_row, audit, make_tree, open_auditor

    from auditor.orchestration.explain import explain

    bad = (
        "from torch import nn\n"
        "from .interfaces import SupportsEagle3, SupportsPP\n\n"
        "class A(nn.Module, SupportsPP, SupportsEagle3): pass\n"
        "class B(SupportsEagle3, nn.Module): pass\n"
        "class BadForCausalLM(A, B): pass\n"
    )
    folder = make_tree(tmp_path, {"vllm/model_executor/models/bad.py": bad})
    add_registry_row(folder, "BadForCausalLM", "bad")
    r = audit(folder, "BadForCausalLM", text_model_type="llama")
    assert r.verdict.value in ("blocked", "unknown")
    info = explain(open_auditor(folder), "BadForCausalLM")
    assert any("consistent method resolution order" in p for p in info["mro_problems"])


# -- cross-check against Python ------------------------------------------------------------

MRO_PACKAGE = {
    "vllm/__init__.py": "",
    "vllm/mro/__init__.py": '''
        from .base import Left, Right, Root
        from vllm.mro.protos import Proto as ReProto
    ''',
    "vllm/mro/base.py": '''
        from typing import Generic, TypeVar

        T = TypeVar("T")

        class Root:
            pass

        class Left(Root):
            pass

        class Right(Root):
            pass

        class Box(Generic[T]):
            pass

        class Obj(object):
            pass
    ''',
    "vllm/mro/protos.py": '''
        import typing
        from typing import Protocol, runtime_checkable

        @runtime_checkable
        class Proto(Protocol):
            flag: bool = True

            def meth(self) -> int: ...

        @runtime_checkable
        class SubProto(Proto, Protocol):
            def meth2(self) -> int: ...

        class Other(typing.Protocol):
            pass
    ''',
    "vllm/mro/mid.py": '''
        import typing

        from . import base
        from .base import Left as L
        from vllm.mro import ReProto, Right


        class Diamond(L, Right):
            pass


        class Twice(Diamond):
            """replaced by the definition below"""


        class Twice(Right, base.Box[int]):
            pass


        class WithProto(Diamond, ReProto):
            def meth(self) -> int:
                return 1


        class GBox(base.Box[str], L):
            pass


        class TypingGeneric(typing.Generic[base.T]):
            pass
    ''',
    "vllm/mro/top.py": '''
        import vllm.mro.mid as mid

        from .. import mro as pkg
        from ..mro import protos


        class Deep(mid.Diamond, mid.GBox):
            pass


        class Multi(mid.WithProto, mid.Twice):
            pass


        class ProtoImpl(protos.SubProto, pkg.Left):
            def meth(self) -> int:
                return 1

            def meth2(self) -> int:
                return 2


        class Mixin:
            pass


        def make(cls):
            class W(cls, Mixin):
                pass

            return W


        class Made(make(pkg.Root)):
            pass


        Made2 = make(mid.Diamond)
        Alias = mid.Diamond
    ''',
}


def _normalise(name: str) -> str:
    return {"builtins.object": "object"}.get(name, name)


@pytest.fixture
def imported_mro_package(tmp_path):
    """Write MRO_PACKAGE, import its modules with Python, and restore sys.modules/sys.path after."""
    root = tmp_path / "tree"
    for rel, src in MRO_PACKAGE.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(src))
    saved = {k: v for k, v in sys.modules.items() if k == "vllm" or k.startswith("vllm.")}
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        mods = {name: importlib.import_module(name)
                for name in ("vllm.mro", "vllm.mro.base", "vllm.mro.protos", "vllm.mro.mid", "vllm.mro.top")}
        yield root, mods
    finally:
        sys.path.remove(str(root))
        for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def test_mro_matches_python(imported_mro_package):
    root, mods = imported_mro_package
    r = Resolver(Tree(FolderSource(root), SummaryCache(enabled=False)))
    checked = []
    for modname, mod in mods.items():
        for name, obj in sorted(vars(mod).items()):
            if not isinstance(obj, type) or not obj.__module__.startswith("vllm."):
                continue
            expected = [_normalise(f"{c.__module__}.{c.__qualname__}") for c in obj.__mro__]
            t = r.resolve_name(modname, name)
            assert isinstance(t, ClassRef), (modname, name, t)
            assert t.dotted == expected[0], (modname, name)
            assert mro_names(r, t) == expected, f"{modname}.{name}"
            checked.append(f"{modname}.{name}")
    # every kind of case was really exercised
    for must in ("vllm.mro.Left", "vllm.mro.ReProto", "vllm.mro.mid.Twice", "vllm.mro.mid.GBox",
                 "vllm.mro.top.Multi", "vllm.mro.top.Made", "vllm.mro.top.Made2", "vllm.mro.top.Alias",
                 "vllm.mro.protos.SubProto", "vllm.mro.protos.Other", "vllm.mro.base.Obj",
                 "vllm.mro.mid.TypingGeneric", "vllm.mro.top.ProtoImpl", "vllm.mro.top.Deep"):
        assert must in checked
    assert len(checked) >= 20
    # the later definition of Twice is the one Python binds, and the one we resolve
    assert mods["vllm.mro.mid"].Twice.__doc__ is None
    assert r.location(r.resolve_name("vllm.mro.mid", "Twice"))[1] == 17


def test_protocol_lookup_matches_python_isinstance(imported_mro_package):
    """A member lookup on the static MRO decides what Python's runtime protocol check decides."""
    root, mods = imported_mro_package
    r = Resolver(Tree(FolderSource(root), SummaryCache(enabled=False)))
    members = ["flag", "meth", "meth2"]
    SubProto = mods["vllm.mro.protos"].SubProto
    for modname, name in (("vllm.mro.top", "ProtoImpl"), ("vllm.mro.top", "Multi"), ("vllm.mro.mid", "Diamond")):
        cls = getattr(mods[modname], name)
        ref = r.resolve_name(modname, name)
        static = all(r.lookup(ref, m) is not None for m in members)
        assert static is isinstance(cls(), SubProto), name


# -- bindings as class statements see them ----------------------------------------------


def test_class_shadowing_its_imported_base(tmp_path):
    r = build(tmp_path, {
        "vllm/impl.py": "class Thing:\n    x = 1\n",
        "vllm/m.py": "from vllm.impl import Thing\n\nclass Thing(Thing):\n    y = 2\n",
    })
    t = r.resolve_name("vllm.m", "Thing")
    res = r.mro(t)
    # Python: (vllm.m.Thing, vllm.impl.Thing, object)
    assert [e.dotted for e in res.entries] == ["vllm.m.Thing", "vllm.impl.Thing", "object"]


def test_subclass_of_the_first_of_two_definitions(tmp_path):
    r = build(tmp_path, {"vllm/m.py": "class A:\n    a = 1\n\nclass B(A):\n    pass\n\nclass A:\n    b = 2\n"})
    b = r.resolve_name("vllm.m", "B")
    # Python: B.a == 1 and B has no attribute b
    assert r.lookup(b, "a") is not None
    assert r.lookup(b, "b") is None


def test_from_a_namespace_package_import_a_submodule(tmp_path):
    """``from pkg import mod`` where ``pkg`` has no ``__init__.py`` (a namespace package, as
    SGLang's ``sglang/srt/models``) binds the submodule."""
    from auditor.index.resolve import Resolver
    from auditor.index.targets import ClassRef, ModuleRef
    from auditor.index.tree import SummaryCache, Tree
    from auditor.source.folder import FolderSource

    root = tmp_path / "t"
    (root / "vllm" / "ns").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    (root / "vllm" / "ns" / "a.py").write_text("class A:\n    pass\n")
    (root / "vllm" / "b.py").write_text("from vllm.ns import a\n\nX = a.A\n")
    r = Resolver(Tree(FolderSource(root), SummaryCache(enabled=False)))
    assert r.resolve_name("vllm.b", "a") == ModuleRef("vllm.ns.a")
    assert r.resolve_name("vllm.b", "X") == ClassRef("vllm.ns.a", "A")
