"""The names every Ray node of a codefu cluster carries, so that placement can tell hosts and instance
groups apart: `codefu launch` starts each node with the labels `codefu-host=<host name>` and
`codefu-group=<instance group>` and the custom resource `codefu-group-<group>` (1 per node); an actor that
must land in one group (the judge on CPU instances, say) asks for `label_selector={"codefu-group": "cpu"}`
or for that resource. Here, below both, so that the launcher that sets them and the roles that read them
import neither each other."""

HOST_LABEL = "codefu-host"
GROUP_LABEL = "codefu-group"


def group_resource(group: str) -> str:
    """The custom resource every node of `group` carries (1 per node)."""
    return f"{GROUP_LABEL}-{group}"
