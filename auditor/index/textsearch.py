"""Cheap byte searches of a module's text, run before the module is summarised: whether it
mentions a name as a whole word, whether it may change or rebind a name (:func:`names_changed`,
:func:`_changes_after`), whether it runs text as code. A false 'may' only costs a summary; a
missed one is a false ``supported``, so each test errs on 'may'. Used by
:mod:`auditor.index.elsewhere`.
"""

from __future__ import annotations

import io
import re
import tokenize
import unicodedata


#: An identifier in a module's text (see :meth:`Resolver.mentioning`).
IDENTIFIER = re.compile(rb"[A-Za-z_]\w*")
#: What :meth:`Resolver._may_change` and :meth:`Resolver.may_change_module` look for after a
#: name: :func:`_changes_after`; before it, on its line, these patterns.
#: Before a name on its line: ``= N`` or ``= pkg.mod.N`` (the name then not followed by a word
#: character, a dot or a call: :data:`_NOT_AFTER_VALUE`).
_VALUE_BEFORE = re.compile(rb"=[ \t\f]*(?:[\w.]*\.)?\Z")
#: Before a name on its line: an assignment whose value reads it inside brackets (``_c =
#: [N][0]``, ``_d = {"k": N}``, ``x = f(N)``: the target may hold N; also a keyword argument
#: after a bracket, read for nothing).
_ASSIGNED_BEFORE = re.compile(rb"(?<![=!<>])=(?!=)[^\n]*[\[{(][^\n]*\Z")
_NOT_AFTER_VALUE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.(")
#: Before a name on its line: ``for ... in ...``.
_LOOP_BEFORE = re.compile(rb"\bfor\b[^\n]*\bin\b")
#: Before a name on its line: ``with ... as`` (a target: ``as N.m``), ``match`` (``case X`` binds
#: the subject).
_TARGET_BEFORE = re.compile(rb"\bas\b|^[ \t\f]*match\b", re.M)
DEL_STATEMENT = re.compile(rb"\bdel\b")
#: Before a name on its line: a call or statement that changes what it is handed
#: (``setattr(N, ...)``, ``delattr(N, ...)``, ``vars(N)[k] = v``, ``del N.m``).
_HANDED_TO = re.compile(rb"(?:\b(?:setattr|delattr|vars)(?:[ \t\f]|\\\r?\n)*\((?:[ \t\f\r\n]|#[^\n]*)*|\bdel\b[^\n]*)\Z")
#: A name an ``as`` binds (``import itertools as it``, ``from x import y as z``).
ALIAS = re.compile(rb"\bas(?:[ \t\f]|\\\r?\n)+([A-Za-z_\x80-\xff][\w\x80-\xff]*)")
_CALLS_EXEC = re.compile(rb"(?<![\w.])(?:exec|eval)[ \t]*\(")
#: A ``for`` loop over what a call computes whose next lines write an attribute of its target
#: (``for c in get_classes():`` then ``c.forward = f``), in a module's text.
LOOP_CALL_WRITE = re.compile(rb"\bfor[ \t]+(\w+)[ \t]+in[ \t][^\n]*\)[ \t]*:[ \t]*\n(?:[^\n]*\n){0,8}?[ \t]*\1\.\w+[ \t]*=(?!=)")
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _is_word_byte(c: int) -> bool:
    """True when byte ``c`` is a word character of a bytes pattern (``\\w``: ASCII letters, digits, ``_``)."""
    return c in _WORD_BYTES


#: A coding cookie on one of a module's first two lines (PEP 263), as Python looks for it.
_COOKIE = re.compile(rb"^[ \t\f]*#[^\r\n]*?coding[:=]", re.M)


def search_text(raw: bytes) -> bytes:
    """The text of a module as the text tests search it: its bytes, and when Python reads them
    otherwise (a coding cookie, ``# coding: utf-7``, decodes them; identifiers are normalised to
    NFKC, so ``ｉtertools`` is ``itertools``) the source as Python reads it, UTF-8 encoded and
    NFKC-normalised, after a line end. Searching both finds every spelling of a name Python
    binds (strings are normalised too: a module searched for nothing, never one missed)."""
    head = raw[:raw.find(b"\n", raw.find(b"\n") + 1) + 1] if raw.count(b"\n", 0, 400) >= 2 else raw[:400]
    if raw.isascii() and (b"coding" not in head or _COOKIE.search(head) is None):
        return raw
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(raw).readline)[0]
        text = raw.decode(encoding, "replace")
    except (SyntaxError, LookupError, ValueError, UnicodeError):
        text = raw.decode("utf-8", "replace")
    norm = unicodedata.normalize("NFKC", text).encode("utf-8", "replace")
    return raw if norm == raw else raw + b"\n" + norm


#: The methods that change the object they are called on (``N.__dict__.update(k=v)``,
#: ``N.__setattr__(k, v)``), read after a name by :func:`_changes_after`.
_CHANGING_METHODS = frozenset({b"update", b"setdefault", b"pop", b"popitem", b"clear", b"__setitem__",
                               b"__delitem__", b"__setattr__", b"__delattr__", b"__init__", b"__class__"})
#: The statement keywords that may open a line continuing an expression (``(N\n if a else b)``).
_CONTINUING = (b"if", b"else", b"and", b"or", b"not", b"in", b"is", b"for", b"as", b"lambda")
#: The bytes that may open a line continuing an expression inside brackets.
_CONTINUING_BYTES = frozenset(b".)]},=[:+-*/|&@%<>^~(")


def _changes_after(text: bytes, end: int, limit: int = 4000) -> bool:
    """Whether the rest of the logical line after a name (ending at ``end``) may make the name
    part of an assignment's target or bind what it holds: an assignment operator (``=``,
    ``+=``, ``:=``, annotated ``: T =``) that is not a comparison or a keyword argument
    (``f(N, k=v)``), an item (``N[k]``: may be stored), or the words ``in`` (a ``for``
    target) or ``as``. It reads on through comments, line ends inside brackets and continued
    lines, and over any brackets after the name (``(N).m = v``, ``N.mro()[0].m = v``,
    ``(N if a else b).m = v``); a line end outside brackets ends the statement unless the next
    line continues an expression (it opens with a dot, a bracket, an operator or such a word:
    the name may sit inside brackets opened before it). A false True is a module summarised
    for nothing; a missed change is never."""
    n = len(text)
    i, depth, stop, plain = end, 0, min(n, end + limit), True
    while i < stop:
        c = text[i]
        was_plain = plain
        if plain and not (_is_word_byte(c) or c >= 0x80 or c in b" \t\f.#\\\r\n"):
            plain = False
        if c == 0x23:  # '#': a comment, to the line end
            j = text.find(b"\n", i)
            i = n if j < 0 else j
            continue
        if c == 0x5C and (text.startswith(b"\n", i + 1) or text.startswith(b"\r\n", i + 1)):
            i += 2 if text[i + 1] == 0x0A else 3
            continue
        if c == 0x0A:  # '\n'
            if depth <= 0:
                j = i + 1
                while j < n and text[j] in b" \t\f\r\n":
                    j += 1
                if j >= n:
                    return False
                word = text[j:j + 7]
                if text[j] not in _CONTINUING_BYTES and not any(
                        word.startswith(k) and (len(word) == len(k) or not _is_word_byte(word[len(k)]))
                        for k in _CONTINUING):
                    return False
            i += 1
            continue
        if c in b"([{":
            if c == 0x5B and was_plain:
                return True  # an item of what the name reaches: ``N[k]``, ``N.d[k]``
            plain = False
            depth += 1
        elif c == 0x2E:  # '.': a member; a changing method called on what the name reaches
            j = i + 1
            while j < n and text[j] in b" \t\f":
                j += 1
            k = j
            while k < n and (_is_word_byte(text[k]) or text[k] >= 0x80):
                k += 1
            if text[j:k] in _CHANGING_METHODS:
                return True
            i = max(k, i + 1)
            continue
        elif c in b")]}":
            depth -= 1
        elif c == 0x3D:  # '='
            if text.startswith(b"=", i + 1):
                i += 2
                continue
            if i > 0 and text[i - 1] in b"<>!":
                i += 1
                continue
            # a keyword argument (``(k=``, ``, k=``, ``*k=`` never) only inside brackets
            j = i - 1
            while j > end and text[j] in b" \t\f":
                j -= 1
            k = j
            while k > end and (_is_word_byte(text[k]) or text[k] >= 0x80):
                k -= 1
            m = k
            while m > end and text[m] in b" \t\f\r\n":
                m -= 1
            if depth > 0 and k < j and text[m] in b"(,":
                i += 1
                continue
            return True
        elif (c == 0x69 or c == 0x61) and (i == 0 or not _is_word_byte(text[i - 1])) \
                and text[i:i + 2] in (b"in", b"as") and (i + 2 >= n or not _is_word_byte(text[i + 2])) \
                and (i + 2 >= n or text[i + 2] < 0x80):
            return True
        i += 1
    return stop < n  # a statement longer than the limit: not read to its end


#: ``\\w`` or a dot: the bytes a dotted name is made of.
_DOTTED_BYTES = _WORD_BYTES | frozenset(b".")
#: ``exec(``/``eval(`` without what may stand before them (see :func:`calls_exec`).
_EXEC_CALL = re.compile(rb"(?:exec|eval)[ \t]*\(")
#: The other two parts of :data:`_RUNS_TEXT`, each searched only when its words occur.
_RUNS_TEXT_TYPE = re.compile(rb"(?:Function|Lambda)Type[ \t]*\(")
_RUNS_TEXT_QUOTED = re.compile(rb"['\"](?:exec|eval)['\"][ \t]*\)[ \t]*\(")


def has_word(text: bytes, needle: bytes) -> bool:
    """Whether ``needle`` occurs in ``text`` as a whole word: what
    ``re.search(rb"(?<![\\w])" + needle + rb"(?![\\w])", text)`` finds, by a search for the
    bytes (a pattern that opens with a look-behind is tried at every position of the text)."""
    size, end_of_text = len(needle), len(text)
    i = text.find(needle)
    while i >= 0:
        end = i + size
        if (i == 0 or text[i - 1] not in _WORD_BYTES) and (end == end_of_text or text[end] not in _WORD_BYTES):
            return True
        i = text.find(needle, i + 1)
    return False


def calls_exec(text: bytes, through_builtins: bool) -> bool:
    """Whether ``text`` calls ``exec``/``eval`` by name: what ``_CALLS_EXEC.search`` finds
    (``(?<![\\w.])(?:exec|eval)[ \\t]*\\(``), or with ``through_builtins`` the first part of
    ``_RUNS_TEXT`` (``builtins.exec(`` too), by a search that starts from the words."""
    for m in _EXEC_CALL.finditer(text):
        i = m.start()
        if i == 0 or text[i - 1] not in _DOTTED_BYTES:
            return True
        if through_builtins and i >= 9 and text[i - 9:i] == b"builtins." and (
                i == 9 or text[i - 10] not in _DOTTED_BYTES):
            return True
    return False


def runs_text(text: bytes) -> bool:
    """Whether ``text`` runs text as code: what ``_RUNS_TEXT.search`` finds, each of its three
    parts searched only when its words occur."""
    if b"exec" in text or b"eval" in text:
        if calls_exec(text, True) or _RUNS_TEXT_QUOTED.search(text) is not None:
            return True
    return (b"FunctionType" in text or b"LambdaType" in text) and _RUNS_TEXT_TYPE.search(text) is not None


def dict_owners(text: bytes) -> set[bytes]:
    """The groups ``_REFLECTED_DICT.finditer(text)`` gives (``([\\w.]+)\\.__dict__``): in each
    run of word characters and dots that holds ``.__dict__`` after its first byte, the run up to
    its last ``.__dict__`` (the greedy group). Found from each ``.__dict__``: the pattern, which
    opens with a repeated class, backtracks from every position of a long text."""
    out: set[bytes] = set()
    mark = b".__dict__"
    i = text.find(mark)
    while i >= 0:
        start = i
        while start > 0 and text[start - 1] in _DOTTED_BYTES:
            start -= 1
        end = i
        while end < len(text) and text[end] in _DOTTED_BYTES:
            end += 1
        last = text.rfind(mark, start, end)
        if last - start >= 1:
            out.add(text[start:last])
        i = text.find(mark, end)
    return out


#: How many names :meth:`Resolver.mentioning` looks up by searching the texts before it indexes
#: every identifier of the tree (a single-target scan asks for a few, a full scan for hundreds).
INDEX_AFTER = 40
#: A dotted name as a change's head is written (``llama.LlamaModel``); any other head text is an
#: expression (``getattr(llama, NAME)``).
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
#: An identifier in a head's text.
IDENT_TEXT = re.compile(r"[A-Za-z_]\w*")


#: The object a module's text reaches reflectively: ``setattr(M, ...)``, ``delattr``, ``getattr``,
#: ``vars(M)`` (group 1), ``M.__dict__`` (group 2): the last part of M is what
#: :meth:`Resolver._reflected` records.
REFLECTED_CALL = re.compile(rb"(?:(?:set|del|get)attr|vars)\(\s*([\w.]+)\s*[,)]")
_REFLECTED_DICT = re.compile(rb"([\w.]+)\.__dict__")
#: A write into ``sys.modules`` in a module's text.
WRITES_SYS_MODULES = re.compile(rb"sys\.modules\s*(?:\[|\.\s*(?:update|setdefault|__setitem__))")
#: What :meth:`Resolver._reflected` records for a module that writes into ``sys.modules``.
SYS_MODULES = "sys.modules"
#: A call that runs text as code, in a module's text.
_RUNS_TEXT = re.compile(rb"(?<![\w.])(?:builtins\.)?(?:exec|eval)[ \t]*\(|(?:Function|Lambda)Type[ \t]*\("
                        rb"|['\"](?:exec|eval)['\"][ \t]*\)[ \t]*\(")
#: The head of a change made through a module object named in ``sys.modules``
#: (``sys.modules["pkg.mod"].Cls.m = v``): the module's name (group 2) and the rest (group 3).
SYS_MODULES_HEAD = re.compile(r"sys\.modules\[(['\"])([\w.]+)\1\]((?:\.\w+)*)")


def names_changed(text: bytes, names: set[str], handed: bool) -> bool:
    """Whether some whole-word occurrence of one of ``names`` in ``text`` may be changed or
    rebound there: a change after it (:func:`_changes_after`), an assignment, ``for``, ``with``
    or ``match`` target before it on its line, ``= N`` (a rebinding), ``for ... in ... N``; with
    ``handed``, also ``setattr(N``, ``delattr(N``, ``vars(N``, ``del ... N``."""
    for n in names:
        needle = n.encode()
        size = len(needle)
        i = text.find(needle)
        while i >= 0:
            end = i + size
            if (i == 0 or not _is_word_byte(text[i - 1])) and (end == len(text) or not _is_word_byte(text[end])):
                start = text.rfind(b"\n", 0, i) + 1
                if _changes_after(text, end) or (handed and _HANDED_TO.search(text, max(0, i - 200), i)) \
                        or _LOOP_BEFORE.search(text, start, i) is not None \
                        or _TARGET_BEFORE.search(text, start, i) is not None:
                    return True
                if (end == len(text) or text[end] not in _NOT_AFTER_VALUE) \
                        and _VALUE_BEFORE.search(text, start, i) is not None:
                    return True
                if _ASSIGNED_BEFORE.search(text, start, i) is not None:
                    return True
            i = text.find(needle, i + 1)
    return False
