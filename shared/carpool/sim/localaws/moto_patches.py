"""The adapter layer for changes to moto's (and its dependencies') internals.

moto is the local AWS of the integration tests and the simulation. A few of its internals are replaced,
either for speed (`carpool.sim.localaws.motofast`) or to answer as AWS does where moto does not
(`carpool.sim.localaws.server`). Those internals are private: any moto release may rename, move or rewrite
them. A replacement written against one version and applied to another would silently do nothing, or
worse, change answers. So every patch declares, as data:

- `replaces`: each internal it replaces (module, attribute path) with a fingerprint of the original it
  was written against (a hash of the original's source, `fingerprint()`);
- `relies_on`: internals it does not replace but whose behaviour it mirrors or depends on (a replaced
  method's helper, the function that imports a patched name at call time), fingerprinted the same way;
- `supported`: the moto versions it was written for (the range `pyproject.toml` pins).

`install()` checks all three before touching anything and raises `MotoInternalChanged`, naming the patch
and the internal, when moto is outside the range or an internal is missing or differs from its
fingerprint. After a moto upgrade, review each named internal against the patch, then record the new
fingerprints (`python -m carpool.sim.localaws.moto_fingerprints` prints the installed ones).

Patches are reference counted under one lock: the first `install` applies a patch, the last `uninstall`
puts exactly the original objects back. Several local AWS servers and simulations may start and stop on
different threads.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import inspect
import re
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

#: moto versions the patches were written for: the range `pyproject.toml` pins (`>=` lower, `<` upper)
SUPPORTED_MOTO = ">=5.0,<6"

Replaced = list[tuple[Any, str, Any]]  # (owner, attribute, original value)

#: one lock for every patch: installs and uninstalls of different patches interleave on several threads
_LOCK = threading.RLock()
_MISSING = object()
#: fingerprints by object identity; the object is kept so that its id cannot be reused
_fingerprints: dict[int, tuple[Any, str]] = {}


class MotoInternalChanged(RuntimeError):
    """A patch's moto internal is missing or no longer the code the patch was written against."""


@dataclass(frozen=True)
class Internal:
    """One internal of moto (or of a library moto calls): `attribute` is a path inside `module`
    (`"SQSBackend.send_message"`, `"unix_time"`), looked up in the owner's own `__dict__` so an
    attribute that moved to a base class counts as changed."""

    module: str
    attribute: str
    fingerprint: str

    @property
    def where(self) -> str:
        return f"{self.module}.{self.attribute}"

    def owner_and_name(self) -> tuple[Any, str]:
        """The object holding the attribute and its name; raises LookupError when the path is gone."""
        try:
            owner: Any = importlib.import_module(self.module)
        except ImportError as e:
            raise LookupError(f"module {self.module} cannot be imported ({e})") from e
        *path, name = self.attribute.split(".")
        for part in path:
            owner = vars(owner).get(part, _MISSING)
            if owner is _MISSING:
                raise LookupError(f"{self.module} has no {part}")
        return owner, name

    def current(self) -> Any:
        """What the attribute holds now (`_MISSING` when absent)."""
        owner, name = self.owner_and_name()
        return vars(owner).get(name, _MISSING)


def fingerprint(value: Any) -> str:
    """A short hash of what an internal is: its source for code (functions, methods, properties),
    its name for a module. Any edit to the source, comments and layout included, changes it: a patch
    mirrors the code, so a changed original must be read again before the patch is trusted."""
    cached = _fingerprints.get(id(value))
    if cached is not None and cached[0] is value:
        return cached[1]
    if isinstance(value, types.ModuleType):
        text = f"module {value.__name__}"
    elif isinstance(value, property):
        text = "\n".join(inspect.getsource(f) for f in (value.fget, value.fset, value.fdel) if f is not None)
    elif isinstance(value, (staticmethod, classmethod)):
        text = inspect.getsource(value.__func__)
    else:
        text = inspect.getsource(value)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    _fingerprints[id(value)] = (value, digest)
    return digest


def moto_version() -> str:
    return importlib.metadata.version("moto")


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0].split("rc")[0].split(".dev")[0])[:3])


def in_range(version: str, spec: str) -> bool:
    """Whether `version` meets a `>=a,<b` specifier (the only operators the range uses)."""
    have = _release(version)
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        op, bound = re.fullmatch(r"(>=|<)\s*([\d.]+)", clause).groups()  # type: ignore[union-attr]
        limit = _release(bound)
        if (op == ">=" and have < limit) or (op == "<" and have >= limit):
            return False
    return True


class MotoPatch:
    """A change to internals for as long as anything uses it. Subclasses declare `replaces` (and
    `relies_on`) and implement `_apply`, which replaces exactly the declared internals and returns
    the originals it replaced."""

    replaces: ClassVar[tuple[Internal, ...]] = ()
    relies_on: ClassVar[tuple[Internal, ...]] = ()
    supported: ClassVar[str] = SUPPORTED_MOTO
    #: every concrete patch, in definition order (the test checks each against the installed moto)
    registry: ClassVar[list[type[MotoPatch]]] = []
    _installs: ClassVar[int] = 0
    _replaced: ClassVar[Replaced] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.replaces:
            MotoPatch.registry.append(cls)

    @classmethod
    def install(cls) -> None:
        with _LOCK:
            if cls._installs == 0:
                cls.verify()
                replaced = cls._apply()
                cls._check_replaced(replaced)
                cls._replaced = replaced
            cls._installs += 1

    @classmethod
    def uninstall(cls) -> None:
        with _LOCK:
            cls._installs = max(0, cls._installs - 1)
            if cls._installs == 0:
                _restore(cls._replaced)
                cls._replaced = []

    @classmethod
    def installed(cls) -> bool:
        return cls._installs > 0

    @classmethod
    def verify(cls) -> None:
        """Raise `MotoInternalChanged` unless moto is in range and every internal matches its fingerprint."""
        version = moto_version()
        if not in_range(version, cls.supported):
            raise MotoInternalChanged(f"{cls.__name__}: written for moto {cls.supported}, installed moto is "
                                      f"{version}")
        # while installed (another local AWS in this process uses it), the internals it replaced are held in
        # `_replaced`: check those originals, not the patch standing in their place. The same holds for an
        # internal another installed patch replaced (a patch may rely on what another one speeds up)
        originals = {(id(owner), name): original for patch in (*MotoPatch.registry, cls)
                     for owner, name, original in patch._replaced}
        for internal in cls.replaces + cls.relies_on:
            problem = _problem(internal, originals)
            if problem:
                raise MotoInternalChanged(f"{cls.__name__}: moto internal {internal.where} {problem}; review "
                                          f"the patch against it and record the new fingerprint")

    @classmethod
    def _apply(cls) -> Replaced:
        raise NotImplementedError

    @classmethod
    def _check_replaced(cls, replaced: Replaced) -> None:
        """The patch changed exactly what it declares (else the declarations would guard nothing)."""
        declared = [i.owner_and_name() for i in cls.replaces]
        done = [(owner, name) for owner, name, _ in replaced]
        if len(declared) != len(done) or any(not any(o is d and n == m for d, m in declared) for o, n in done):
            _restore(replaced)
            raise MotoInternalChanged(f"{cls.__name__}: replaced {[n for _, n in done]}, declares "
                                      f"{[i.where for i in cls.replaces]}")


def _problem(internal: Internal, originals: dict[tuple[int, str], Any] | None = None) -> str | None:
    try:
        value = internal.current()
        if originals:
            owner, name = internal.owner_and_name()
            value = originals.get((id(owner), name), value)
    except LookupError as e:
        return f"is missing ({e})"
    if value is _MISSING:
        return "is missing"
    try:
        found = fingerprint(value)
    except (OSError, TypeError) as e:
        return f"cannot be read ({e})"
    if found != internal.fingerprint:
        return f"changed (fingerprint {found}, patch written against {internal.fingerprint})"
    return None


def _restore(replaced: Replaced) -> None:
    for owner, name, original in reversed(replaced):
        setattr(owner, name, original)


@contextlib.contextmanager
def installed(*patches: type[MotoPatch]) -> Iterator[None]:
    """Install the patches for the duration of the block, all or none (a failing install undoes the
    ones before it)."""
    done: list[type[MotoPatch]] = []
    try:
        for patch in patches:
            patch.install()
            done.append(patch)
        yield
    finally:
        for patch in reversed(done):
            patch.uninstall()


def current_fingerprints(patch: type[MotoPatch]) -> dict[str, str]:
    """The installed fingerprints of a patch's internals (for recording them after a review)."""
    found: dict[str, str] = {}
    for internal in patch.replaces + patch.relies_on:
        value = internal.current()
        found[internal.where] = "missing" if value is _MISSING else fingerprint(value)
    return found
