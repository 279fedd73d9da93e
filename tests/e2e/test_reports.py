"""The table, JUnit and JSON reports of ``verify`` say the same true things.

Real runs against loopback servers: what was compared (coverage, sample, seed,
encodings) is in every format; JUnit's counts are its test cases', an outage is an
error and never a failure, and its class names keep versions in one package; a
certificate about to expire shows in the table and JUnit, not only in JSON; piped
output is not wrapped at 80 columns. (Every JSON document is validated against the
shipped schema by the autouse fixture in conftest.)
"""

from __future__ import annotations

import ipaddress
import json
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path
from xml.etree import ElementTree as ET

from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from artifactcheck.cli.main import main
from artifactcheck_sim.fleet import RELEASES
from artifactcheck_sim.web import Site


def verify(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["verify", *args], catch_exceptions=False)
    return result.exit_code, result.stdout


def targets(*pairs: tuple[str, str]) -> list[str]:
    return [a for url, version in pairs for a in ("--target", f"{url}={version}")]


def junit_counts_agree(suite: ET.Element) -> None:
    cases = suite.findall("testcase")
    assert suite.get("tests") == str(len(cases))
    assert suite.get("failures") == str(len(suite.findall("testcase/failure")))
    assert suite.get("errors") == str(len(suite.findall("testcase/error")))
    for case in cases:  # Jenkins splits class names at dots: no version may add any
        assert case.get("classname", "").count(".") <= 1, case.get("classname")


def test_junit_counts_outages_as_errors_and_keeps_versions_out_of_packages(
    make_fleet, web, tmp_path: Path
) -> None:
    fleet = make_fleet(2, version="1.4.1")
    fleet.drift(1, serves="1.4.2")
    down = "http://127.93.40.1:9/"  # nothing listens: unreachable
    web.remove(fleet.cdn_url)  # the CDN is down too: a fleet-wide outage
    junit, js = tmp_path / "r.xml", tmp_path / "r.json"
    args = [
        *targets(*((i.url, i.version) for i in fleet.instances), (down, "1.4.1")),
        "--release-manifest",
        fleet.release_template,
        "--cdn",
        fleet.cdn_url,
        "--deadline",
        "5",
    ]
    code, _ = verify(*args, "-o", f"junit={junit}", "-o", f"json={js}")
    assert code == 1
    suite = ET.parse(junit).getroot()
    junit_counts_agree(suite)
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases[down].find("error") is not None and cases[down].find("failure") is None
    assert cases[down].find("error").get("type") == "unreachable"
    assert cases[fleet.instances[1].url].find("failure").get("type") == "mismatch"
    assert cases[fleet.instances[0].url].get("classname") == "artifactcheck.1_4_1"
    fleet_cases = [c for c in suite.findall("testcase") if c.get("classname").endswith(".fleet")]
    assert fleet_cases and all(c.find("failure") is None for c in fleet_cases)
    assert all(c.find("error") is not None for c in fleet_cases)
    assert json.loads(js.read_text())["schema"] == "artifactcheck/report/v3"


def test_table_and_junit_say_what_was_compared_and_sampled(make_fleet, tmp_path: Path) -> None:
    fleet = make_fleet(3, version="1.4.1")
    args = [
        *targets(*((i.url, i.version) for i in fleet.instances)),
        "--release-manifest",
        fleet.release_template,
        "--sample-assets",
        "1",
        "--sample-instances",
        "2",
    ]
    code, out = verify(*args)
    assert code == 0, out
    assert "2 of 3 instances checked" in out
    seed = int(out.split("repeat this sample with --seed ")[1].split(")")[0])
    assert "(sampled)" in out and " of 8 files" in out
    assert "content " in out, "the serves column says it shows a content fingerprint"
    junit = tmp_path / "r.xml"
    code, _ = verify(*args, "--seed", str(seed), "-o", f"junit={junit}")
    suite = ET.parse(junit).getroot()
    junit_counts_agree(suite)
    text = suite.find("system-out").text
    assert f"seed {seed}" in text and "2 of 3 instances checked" in text
    assert all("(sampled)" in c.find("system-out").text for c in suite.findall("testcase"))
    code, out = verify(*args, "--seed", str(seed), "-o", "json")
    doc = json.loads(out)
    assert doc["sample"] == {
        "seed": seed,
        "instances_checked": 2,
        "instances_total": 3,
        "assets_per_instance": 1,
        "sampled": True,
    }
    assert all(r["coverage"]["compared"] < r["coverage"]["total"] for r in doc["results"])


def test_piped_table_is_not_wrapped(make_fleet) -> None:
    fleet = make_fleet(1, version="1.4.1")
    fleet.drift(0, serves="1.4.2")
    code, out = verify(
        *targets((fleet.instances[0].url, "1.4.1")),
        "--release-manifest",
        fleet.release_template,
    )
    assert code == 1
    assert max(len(line) for line in out.splitlines()) > 120
    row = next(line for line in out.splitlines() if fleet.instances[0].url in line)
    assert "assets/index-Bfu9pp8v.js" in row, "the reason's file names are on the row, whole"


def _expiring_https_site(web, host: str, days: float, tmp_path: Path) -> tuple[str, str]:
    """An https site whose certificate (its own CA) expires in ``days``; (url, CA file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=30))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(cert_file), str(key_file))
    url = web.add(Site(root=RELEASES["1.4.1"]), host, ssl_context=ctx)
    return url, str(cert_file)


def test_an_expiring_certificate_shows_in_table_and_junit(make_fleet, web, tmp_path: Path) -> None:
    fleet = make_fleet(1, version="1.4.1")
    url, ca = _expiring_https_site(web, "127.93.41.1", 3, tmp_path)
    args = [
        *targets((url, "1.4.1")),
        "--release-manifest",
        fleet.release_template,
        "--ca-bundle",
        ca,
    ]
    code, out = verify(*args)
    assert code == 0, out  # the content is right: exit code from the verdict
    flat = " ".join(out.split())
    assert "consistent" in flat and "tls-expiring" in flat and "expires" in flat
    junit = tmp_path / "r.xml"
    verify(*args, "-o", f"junit={junit}")
    suite = ET.parse(junit).getroot()
    junit_counts_agree(suite)
    case = suite.find("testcase")
    assert case.find("failure") is None and case.find("error") is None
    assert "tls-expiring" in case.find("system-out").text
