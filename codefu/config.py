"""Configs: one dataclass per component, loaded from YAML with dotted `key.sub=value` overrides.

    cfg = load_config(RunConfig, "configs/cpu.yaml", ["rollout.n=4", "trainer.kl_coef=0"])

Every key is checked against the dataclass fields: an unknown key or a value of the wrong type (NaN
included) is a `CodefuError` naming the dotted key and where its value came from: the file as the user
wrote it, or "command line" for a key an override set. Never a silent default. Values of overrides are
parsed as YAML scalars (`4`, `0.5`, `true`, `null`, `[1, 2]`, `text`).
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable
from operator import attrgetter
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

import yaml

from codefu.errors import CodefuError

T = TypeVar("T")
#: Where the value of a dotted key came from, as an error message names it: a file, "command line".
Source = str | Callable[[str], str]
COMMAND_LINE = "command line"


class _Yaml12Loader(yaml.SafeLoader):
    """YAML with only true/false as booleans (YAML 1.2): `cgroup: off` must stay the string "off"; and
    1.2's floats: `5e-5` is a number."""


_Yaml12Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
# YAML 1.1 (PyYAML) wants a dot in a float, so `lr: 5e-5` would be the string "5e-5"; 1.2 reads a number
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def _parse_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Yaml12Loader)  # noqa: S506 - a SafeLoader subclass


def load_config(
    cls: type[T],
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    *,
    name: str | None = None,
    check: Callable[[T], None] | None = None,
) -> T:
    """`cls` from the YAML file `path` (None: the defaults) and `key.sub=value` overrides. An error names
    the file as `name` (default: `path` as given) or, for a key an override set, the command line.
    `check` (range rules beyond types) runs on the result; its CodefuError, which must start with the
    dotted key it is about ("trainer.lr must be > 0, got -1.0"), is named the same way."""
    data: dict[str, Any] = {}
    file = "defaults" if path is None else name or str(path)
    if path is not None:
        try:
            loaded = _parse_yaml(Path(path).read_text())
        except OSError as e:
            raise CodefuError(f"{file}: cannot read config ({e.strerror})") from None
        except yaml.YAMLError as e:
            raise CodefuError(f"{file}: not valid YAML ({e})") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise CodefuError(f"{file}: a config must be a mapping of keys to values")
        data = loaded or {}
    overridden = []
    for item in overrides or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise CodefuError(f"override {item!r} is not of the form key.sub=value")
        try:
            value = _parse_yaml(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        _set_dotted(data, key.strip(), value)
        overridden.append(key.strip())

    def source(key: str) -> str:
        on_line = any(key == k or key.startswith((k + ".", k + "[")) for k in overridden)
        return COMMAND_LINE if on_line else file

    obj = from_dict(cls, data, source=source)
    if check is not None:
        try:
            check(obj)
        except CodefuError as e:
            raise CodefuError(f"{source(_key_of(str(e)))}: {e}") from None
    return obj


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    *parents, leaf = key.split(".")
    node = data
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise CodefuError(f"override {key}: {part!r} is a value, not a section")
        node = child
    node[leaf] = value


def from_dict(cls: type[T], data: dict[str, Any], source: Source = "config", prefix: str = "") -> T:
    """Build dataclass `cls` from `data`, recursively; errors name the dotted key and the source (one for
    all keys, or a function of the dotted key)."""
    if not isinstance(data, dict):
        key = prefix.rstrip(".") or "config"
        raise CodefuError(f"{_where(source, key)}: {key} must be a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    hints = get_type_hints(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        known = ", ".join(sorted(fields))
        key = prefix + unknown[0]
        raise CodefuError(f"{_where(source, key)}: unknown key {key} (known here: {known})")
    required = [
        n
        for n, f in fields.items()
        if n not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if required:
        key = prefix + required[0]
        raise CodefuError(f"{_where(source, key)}: {key} is required")
    kwargs = {name: _coerce(hints[name], value, source, prefix + name) for name, value in data.items()}
    try:
        obj = cls(**kwargs)
    except ValueError as e:  # a section's own check (__post_init__): "field must be ..."
        message = prefix + str(e).removeprefix(f"{cls.__name__}: ")
        key = _key_of(message)
        name = key.removeprefix(prefix)
        if name in data and message.startswith(f"{key} must be") and ", got " not in message:
            message += f", got {data[name]!r}"  # the value, as every other error names it
        raise CodefuError(f"{_where(source, key)}: {message}") from None
    for key, owner in getattr(cls, "DERIVED", {}).items():
        _check_derived(data, key, owner, obj, source, prefix)
    return obj


def _where(source: Source, key: str) -> str:
    return source if isinstance(source, str) else source(key)


def _key_of(message: str) -> str:
    """The dotted key a check's message starts with ("trainer.lr must be > 0, got -1.0")."""
    match = re.match(r"[\w.]*", message)
    return match.group() if match else ""


def _check_derived(data: dict[str, Any], key: str, owner: str, obj: Any, source: Source, prefix: str) -> None:
    """A derived key (`cls.DERIVED`: key -> the key it follows) may be written only with its owner's value
    (saved configs of older versions hold both): anything else names the key the user wrote."""
    section, _, name = key.rpartition(".")
    written = data.get(section, {}) if section else data
    if not isinstance(written, dict) or name not in written:
        return
    value = attrgetter(owner)(obj)
    if written[name] != value:
        raise CodefuError(
            f"{_where(source, prefix + key)}: {prefix}{key} is not a setting of its own: it follows "
            f"{prefix}{owner} (= {value!r}); write {prefix}{owner}: {written[name]!r} instead"
        )


def _coerce(tp: Any, value: Any, source: Source, key: str) -> Any:
    def bad(expected: str) -> CodefuError:
        return CodefuError(f"{_where(source, key)}: {key} must be {expected}, got {value!r}")

    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, source, key + ".")
    if origin in (typing.Union, types.UnionType):
        options = get_args(tp)
        if value is None and type(None) in options:
            return None
        shaped: CodefuError | None = None  # the error of an option of the value's shape, inside it
        for option in (o for o in options if o is not type(None)):
            try:
                return _coerce(option, value, source, key)
            except CodefuError as e:
                if shaped is None and _same_shape(option, value):
                    shaped = e
        if shaped is not None:  # e.g. a list whose item [1] is wrong: that item's key says more
            raise shaped
        raise bad(" or ".join(_describe(o) for o in options))
    if origin is Literal:
        if value not in get_args(tp):
            raise bad("one of " + ", ".join(repr(a) for a in get_args(tp)))
        return value
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            raise bad(f"a list ({_describe(get_args(tp)[0])} each)")
        item = get_args(tp)[0] if get_args(tp) else Any
        items = [_coerce(item, v, source, f"{key}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise bad("a mapping")
        return dict(value)
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise bad("a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise bad("a string")
        return value
    raise bad(_describe(tp))


def _same_shape(tp: Any, value: Any) -> bool:
    """A list for a list type, a mapping for a section: an error inside it is about one of its parts."""
    if get_origin(tp) in (list, tuple):
        return isinstance(value, list | tuple)
    return dataclasses.is_dataclass(tp) and isinstance(value, dict)


_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string", type(None): "null"}


def _describe(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(o) for o in get_args(tp))
    if origin in (list, tuple):
        return f"a list ({_describe(get_args(tp)[0])} each)" if get_args(tp) else "a list"
    if origin is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):  # a section inside a list: its keys
        hints = get_type_hints(tp)
        keys = ", ".join(f"{f.name}: {_describe(hints[f.name])}" for f in dataclasses.fields(tp) if f.init)
        return f"{{{keys}}}"
    return _NAMES.get(tp) or getattr(tp, "__name__", str(tp))


def to_dict(obj: Any) -> dict[str, Any]:
    """Plain data (for printing, saving as YAML and loading back with `from_dict`); derived keys left out."""
    data = dataclasses.asdict(obj)
    for key in getattr(type(obj), "DERIVED", {}):
        section, _, name = key.rpartition(".")
        (data[section] if section else data).pop(name, None)
    return data


def dump_yaml(obj: Any) -> str:
    return yaml.safe_dump(to_dict(obj), sort_keys=False)


def config_keys(cls: type, prefix: str = "") -> list[str]:
    """Every key a user may write in a config of `cls`, dotted, with its type (`key: type`); derived keys
    (`cls.DERIVED`) are left out: they are not the user's to write."""
    hints = get_type_hints(cls)
    out: list[str] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            out += config_keys(tp, f"{prefix}{f.name}.")  # type: ignore[arg-type]
        else:
            out.append(f"{prefix}{f.name}: {_describe(tp)}")
    derived = {prefix + key for key in getattr(cls, "DERIVED", {})}
    return [k for k in out if k.partition(":")[0] not in derived]
