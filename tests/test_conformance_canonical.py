"""One canonical JSON (RFC 8785) for the whole repository: agentflow's digest, the peer
adapters' ``echo`` and the Node adapter agree with conformance/digest-vectors.json, the
vectors the README points other languages at (SPEC §3, ``ToolApprovalRequest.digest``)."""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

from agentflow.canonical import arguments_digest, canonical_json

REPO = pathlib.Path(__file__).resolve().parent.parent
VECTORS = json.loads((REPO / "conformance" / "digest-vectors.json").read_text("utf-8"))


def _canonical_or_none(text):
    try:
        return canonical_json(json.loads(text))
    except ValueError:
        return None


@pytest.mark.parametrize("vector", VECTORS, ids=[v["what"] for v in VECTORS])
def test_agentflow_agrees_with_each_digest_vector(vector):
    assert _canonical_or_none(vector["arguments"]) == vector["canonical"]
    assert arguments_digest(vector["arguments"]) == vector["digest"]


def test_the_peer_adapters_use_agentflows_definition():
    """The shared helper of conformance/adapters is agentflow's function itself, so
    there is one definition to be right (README, "BEHAVIOUR": echo)."""
    from conformance.adapters import common
    assert common.canonical_json is canonical_json


def test_the_vectors_cover_what_json_dumps_gets_wrong():
    """Each vector that Python's sort_keys/separators form gets wrong is an RFC 8785
    point (UTF-16 member order, ECMAScript numbers): the vectors can catch that form."""
    def naive(text):
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False)
    wrong = [v["what"] for v in VECTORS if v["canonical"] is not None
             and naive(v["arguments"]) != v["canonical"]]
    assert len(wrong) >= 2, wrong


def test_the_node_adapter_agrees_with_the_digest_vectors():
    node = shutil.which("node")
    if node is None:
        assert os.environ.get("CI") != "true", "node is needed under CI=true"
        pytest.skip("node is not installed")
    script = ("const {canonical} = require(process.argv[1]);"
              "const out = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'))"
              ".map((v) => { try { return canonical(JSON.parse(v.arguments)); }"
              " catch (e) { return null; } });"
              "process.stdout.write(JSON.stringify(out));")
    done = subprocess.run([node, "-e", script, str(REPO / "conformance/adapters/node/adapter.js"),
                           str(REPO / "conformance/digest-vectors.json")],
                          capture_output=True, text=True, timeout=30, check=True)
    assert json.loads(done.stdout) == [v["canonical"] for v in VECTORS]


def test_the_readmes_javascript_recipe_agrees_with_every_vector():
    """conformance/README.md's JavaScript recipe, run as printed: the canonical form
    (``null`` where it throws: a 400-digit integer, which ``JSON.parse`` makes
    ``Infinity``, and a lone surrogate) and the digest of every vector."""
    import re
    node = shutil.which("node")
    if node is None:
        assert os.environ.get("CI") != "true", "node is needed under CI=true"
        pytest.skip("node is not installed")
    readme = (REPO / "conformance" / "README.md").read_text("utf-8")
    [recipe] = re.findall(r"runs this recipe on every vector\)?:\n\n```js\n(.*?)```", readme,
                          re.S)
    script = recipe + (
        "const vectors = JSON.parse(require('fs').readFileSync(process.argv[1], 'utf8'));"
        "process.stdout.write(JSON.stringify(vectors.map((v) => { let c = null;"
        " try { c = canonical(JSON.parse(v.arguments)); } catch (e) {}"
        " return [c, digest(v.arguments)]; })));")
    done = subprocess.run([node, "-e", script, str(REPO / "conformance/digest-vectors.json")],
                          capture_output=True, text=True, timeout=30, check=True)
    assert json.loads(done.stdout) == [[v["canonical"], v["digest"]] for v in VECTORS]
    assert sum(v["canonical"] is None and v["arguments"].startswith("{") for v in VECTORS) >= 3
