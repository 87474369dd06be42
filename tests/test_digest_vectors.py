"""The arguments digest (SPEC section 3, R3) against an independent implementation: every
JSON vector of conformance/digest-vectors.json (RFC 8785's own number and string
examples among them) is what the rfc8785 package (pinned in the Makefile's test
install) computes, and conformance case 044 asks an adapter for each digest, so another
language can prove it computes the same value. (test_conformance_canonical.py checks
agentflow, the peer adapters and the Node adapter against the same file.)"""

import hashlib
import json
import os
import pathlib

import pytest

from agentflow.canonical import arguments_digest, canonical_json

ROOT = pathlib.Path(__file__).resolve().parent.parent
VECTORS = json.loads((ROOT / "conformance" / "digest-vectors.json").read_text("utf-8"))
JCS = [v for v in VECTORS if v["canonical"] is not None]

# RFC 8785 Appendix B, as printed there: IEEE 754 bits -> the number's canonical text
APPENDIX_B = {
    "0000000000000000": "0", "8000000000000000": "0", "0000000000000001": "5e-324",
    "8000000000000001": "-5e-324", "7fefffffffffffff": "1.7976931348623157e+308",
    "ffefffffffffffff": "-1.7976931348623157e+308", "4340000000000000": "9007199254740992",
    "c340000000000000": "-9007199254740992", "4430000000000000": "295147905179352830000",
    "44b52d02c7e14af5": "9.999999999999997e+22", "44b52d02c7e14af6": "1e+23",
    "44b52d02c7e14af7": "1.0000000000000001e+23", "444b1ae4d6e2ef4e": "999999999999999700000",
    "444b1ae4d6e2ef4f": "999999999999999900000", "444b1ae4d6e2ef50": "1e+21",
    "3eb0c6f7a0b5ed8c": "9.999999999999997e-7", "3eb0c6f7a0b5ed8d": "0.000001",
    "41b3de4355555553": "333333333.3333332", "41b3de4355555554": "333333333.33333325",
    "41b3de4355555555": "333333333.3333333", "41b3de4355555556": "333333333.3333334",
    "41b3de4355555557": "333333333.33333343", "becbf647612f3696": "-0.0000033333333333333333",
    "43143ff3c1cb0959": "1424953923781206.2"}


def rfc8785():
    try:
        import rfc8785
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("the rfc8785 package is required under CI=true (make test installs it)")
        pytest.skip("the rfc8785 package is not installed (make test installs it)")
    return rfc8785


@pytest.mark.parametrize("vector", JCS, ids=[v["what"] for v in JCS])
def test_the_vector_is_rfc8785_s_and_agentflow_computes_it(vector):
    value = json.loads(vector["arguments"])
    # RFC 8785 numbers are IEEE doubles; the package refuses Python ints beyond 2^53
    doubles = json.loads(vector["arguments"], parse_int=float)
    assert rfc8785().dumps(doubles).decode("utf-8") == vector["canonical"]
    assert hashlib.sha256(vector["canonical"].encode("utf-8")).hexdigest() == vector["digest"]
    assert canonical_json(value) == vector["canonical"]
    assert arguments_digest(vector["arguments"]) == vector["digest"]


def test_the_number_vectors_are_appendix_b_as_printed():
    numbers = {v["what"].rsplit("0x", 1)[1]: v["canonical"] for v in JCS
               if "Appendix B" in v["what"]}
    assert {bits: text[len('{"n":'):-1] for bits, text in numbers.items()} == APPENDIX_B


def test_rfc8785_s_own_json_text_example():
    example = next(v for v in JCS if "3.2.2" in v["what"])
    assert example["canonical"] == ('{"literals":[null,true,false],"numbers":[333333333.3333333,'
                                    '1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}')


def test_a_number_beyond_the_double_range_is_hashed_as_sent():
    raw = '{"amount": ' + "9" * 400 + "}"
    with pytest.raises(Exception):
        rfc8785().dumps(json.loads(raw))  # no RFC 8785 form
    with pytest.raises(ValueError, match="beyond the IEEE 754 double range"):
        canonical_json(json.loads(raw))
    assert arguments_digest(raw) == hashlib.sha256(raw.encode()).hexdigest()


def test_case_044_asks_for_every_vector_s_digest():
    case = json.loads((ROOT / "conformance" / "cases" / "044-digest-vectors.json").read_text())
    asked = [u for u in case["turns"][0]["expect"]["updates"] if u["type"] == "approval_request"]
    # a text that is not JSON can never run, so it is never put to a person (SPEC R18)
    assert [(u["arguments"], u["digest"]) for u in asked] == [
        (json.loads(v["arguments"]), v["digest"]) for v in JCS]


def test_a_lone_surrogate_has_no_canonical_form_and_is_hashed_as_sent():
    """RFC 8785 §3.1 takes Unicode only: a lone surrogate is refused, as the rfc8785
    package refuses it, and the arguments are hashed as the model sent them; a
    session's signature, which only agentflow reads back, keeps it (codec.sign)."""
    from agentflow.codec import sign
    raw = '{"name": "report-\\ud800.txt"}'
    with pytest.raises(Exception):
        rfc8785().dumps(json.loads(raw))
    with pytest.raises(ValueError, match="lone surrogate"):
        canonical_json(json.loads(raw))
    with pytest.raises(ValueError, match="lone surrogate"):
        canonical_json({json.loads('"\\udc00"'): 1})
    assert arguments_digest(raw) == hashlib.sha256(raw.encode()).hexdigest()
    assert canonical_json(json.loads(raw), lone_surrogates=True) == '{"name":"report-\ud800.txt"}'
    assert sign(json.loads(raw), "key") != sign({"name": "report-.txt"}, "key")
    vector = next(v for v in VECTORS if "lone surrogate" in v["what"])
    assert (vector["arguments"], vector["canonical"]) == (raw, None)
