"""Load YAML safely, remembering the line of every node and rejecting duplicate keys.

PyYAML's safe composer gives us a node tree with marks; we build the Python data from it
ourselves so that we know the path of every value (for error messages) and can see duplicate
keys, which ``yaml.safe_load`` silently resolves to the last one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import yaml

from fasttrack.manifest.problems import Path, Problem

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _ManifestLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """Safe loader without the timestamp resolver: dates stay strings, so data stays JSON."""


_ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


_MAX_NODES = 200_000
# Deepest nesting of mappings and sequences a manifest may have (real ones nest about 6 levels).
# Checked on the parser's event stream before the composer or the builder recurse, and again
# while building (aliases can nest a structure inside itself deeper than the text shows).
MAX_DEPTH = 64
_PLAIN_COLLECTION_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})


@dataclass
class LoadedYaml:
    """The plain data, the line (1-based) of every path, and the problems found while loading."""

    data: object
    lines: dict[Path, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def line_of(self, path: Path) -> int:
        """Line of ``path`` or of its nearest ancestor that exists in the file."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return 1


def load_yaml(text: str) -> LoadedYaml:
    """Parse one YAML document. Syntax errors become problems rather than exceptions."""
    too_deep = _depth_problem(text)
    if too_deep is not None:
        return LoadedYaml(None, {}, [too_deep])
    loader = _ManifestLoader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else 1
        what = err.problem or "unreadable YAML"
        if err.context and err.context_mark is not None:
            what += f" ({err.context} on line {err.context_mark.line + 1})"
        return LoadedYaml(None, {}, [Problem((), f"YAML syntax error: {what}", line=line)])
    except yaml.YAMLError as err:
        return LoadedYaml(None, {}, [Problem((), f"YAML error: {err}", line=1)])
    finally:
        loader.dispose()
    result = LoadedYaml(None, {(): 1})
    if node is None:
        result.problems.append(Problem((), "the file is empty: expected a mapping of manifest sections", line=1))
        return result
    result.lines[()] = node.start_mark.line + 1  # the document's first node, after comments
    result.data = _Builder(loader, result).build(node, ())
    return result


def _depth_problem(text: str) -> Problem | None:
    """A problem when mappings/sequences nest deeper than MAX_DEPTH, found on the event stream
    (no recursion); None otherwise, also for a syntax error (the composer reports it)."""
    loader = _ManifestLoader(text)
    depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    return Problem(
                        (),
                        f"mappings and lists nest deeper than {MAX_DEPTH} levels here, the most a manifest may nest",
                        line=event.start_mark.line + 1 if event.start_mark is not None else 1,
                    )
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError:
        return None
    finally:
        loader.dispose()
    return None


class _Builder:
    def __init__(self, loader: yaml.SafeLoader, out: LoadedYaml):
        self.loader = loader
        self.out = out
        self.active: set[int] = set()  # node ids on the current path: guards recursive aliases
        self.budget = _MAX_NODES  # aliases can expand exponentially ("billion laughs")
        self.too_deep = False

    def problem(self, path: Path, message: str, node: yaml.Node) -> None:
        self.out.problems.append(Problem(path, message, line=node.start_mark.line + 1))

    def build(self, node: yaml.Node, path: Path) -> object:
        if len(path) > MAX_DEPTH:  # reached through aliases: the text itself passed the event check
            if not self.too_deep:
                self.problem(path[:MAX_DEPTH], f"values nest deeper than {MAX_DEPTH} levels (through aliases)", node)
            self.too_deep = True
            return None
        self.budget -= 1
        if self.budget < 0:
            if self.budget == -1:
                self.problem(path, f"document expands to more than {_MAX_NODES} values (alias bomb?)", node)
            return None
        if id(node) in self.active:
            self.problem(path, "recursive YAML alias is not allowed", node)
            return None
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in _PLAIN_COLLECTION_TAGS:
            self.problem(path, f"unsupported YAML tag {node.tag!r}: a manifest is plain data", node)
            return None
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            if isinstance(node, yaml.SequenceNode):
                items = []
                for index, child in enumerate(node.value):
                    self.out.lines.setdefault((*path, index), child.start_mark.line + 1)
                    items.append(self.build(child, (*path, index)))
                return items
            return self._scalar(node, path)
        finally:
            self.active.discard(id(node))

    def _scalar(self, node: yaml.Node, path: Path) -> object:
        try:
            value = self.loader.construct_object(node, deep=True)
        except yaml.YAMLError as err:
            self.problem(path, f"cannot read value: {getattr(err, 'problem', err)}", node)
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self.problem(path, f"numbers must be finite (got {node.value})", node)
            return None
        if isinstance(value, (bytes, bytearray)):
            self.problem(path, "binary values are not allowed", node)
            return None
        return value

    def _mapping(self, node: yaml.MappingNode, path: Path) -> dict:
        own = sum(1 for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge")
        try:
            self.loader.flatten_mapping(node)  # resolves '<<' merge keys; merged pairs come first
        except yaml.YAMLError as err:
            self.problem(path, f"bad merge key: {getattr(err, 'problem', err)}", node)
            return {}
        merged, explicit = node.value[: len(node.value) - own], node.value[len(node.value) - own :]
        result: dict = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in explicit:
            key = self._key(key_node, path)
            if key is None:
                continue
            line = key_node.start_mark.line + 1
            if key in first_line:
                self.problem(
                    (*path, key),
                    f"duplicate key {key!r} (first defined on line {first_line[key]}, again on line {line})",
                    key_node,
                )
                continue
            first_line[key] = line
            self.out.lines[(*path, key)] = line
            result[key] = self.build(value_node, (*path, key))
        # Merged keys fill in what the mapping does not set itself (YAML merge semantics).
        for key_node, value_node in merged:
            key = self._key(key_node, path)
            if key is None or key in result:
                continue
            result[key] = self.build(value_node, (*path, key))
            first_line[key] = key_node.start_mark.line + 1
            self.out.lines.setdefault((*path, key), key_node.start_mark.line + 1)
        return result

    def _key(self, key_node: yaml.Node, path: Path) -> str | None:
        if not isinstance(key_node, yaml.ScalarNode):
            self.problem(path, "mapping keys must be plain strings", key_node)
            return None
        key = self._scalar(key_node, path)
        if not isinstance(key, str):
            self.problem(path, f"mapping keys must be strings (got {key_node.value!r}; quote it)", key_node)
            return None
        return key
