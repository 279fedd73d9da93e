"""The CLI's configuration edge, as a user meets it: real files, real loopback servers.

Which release manifest judges which instance (several files, the version each declares,
a ``{version}`` template), the reported version as hostile input, names-only manifests,
and every typo that must be exit 2 before any request is sent.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import click
import pytest
from click.testing import CliRunner

from artifactcheck.cli.main import main
from artifactcheck.cli.options import SingleValueOption
from artifactcheck.manifests import native
from artifactcheck_sim.fleet import RELEASES, SimFleet
from artifactcheck_sim.web import Site, WebFleet

R1, R2 = "1.4.1", "1.4.2"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def verify(*args: str) -> tuple[int, str, str]:
    return run("verify", *args)


def targets(*fleets: SimFleet, versions: bool = True) -> list[str]:
    args: list[str] = []
    for fleet in fleets:
        for inst in fleet.instances:
            args += ["--target", f"{inst.url}={inst.version}" if versions else inst.url]
    return args


def results(out: str) -> dict[str, dict[str, Any]]:
    return {r["instance"]: r for r in json.loads(out)["results"]}


def requests_to(web: WebFleet) -> int:
    return sum(len(server.received) for server in web)


@pytest.fixture
def two_releases(make_fleet) -> tuple[SimFleet, SimFleet]:
    """Two instances of 1.4.1 and one of 1.4.2, each fleet with both release files."""
    return make_fleet(2, version=R1), make_fleet(1, version=R2)


@pytest.fixture
def quiet(web: WebFleet, make_fleet) -> tuple[SimFleet, WebFleet]:
    """One running instance whose server must receive nothing (config errors)."""
    fleet = make_fleet(1, version=R1)
    for server in web:
        server.reset_stats()
    return fleet, web


# --------------------------------------------------------------------- several releases


def test_two_concrete_manifests_judge_each_instance_by_its_version(two_releases) -> None:
    old, new = two_releases
    code, out, err = verify(
        *targets(old, new),
        "--release-manifest",
        str(old.release_dir / f"{R1}.json"),
        "--release-manifest",
        str(old.release_dir / f"{R2}.json"),
        "-o",
        "json",
    )
    got = results(out)
    assert {r["verdict"] for r in got.values()} == {"consistent"}, (out, err)
    assert code == 0
    assert got[new.instances[0].url]["reason"] == f"serves release {R2}"


def test_order_of_concrete_manifests_does_not_matter(two_releases) -> None:
    old, new = two_releases
    code, out, _ = verify(
        *targets(old, new),
        "--release-manifest",
        str(old.release_dir / f"{R2}.json"),
        "--release-manifest",
        str(old.release_dir / f"{R1}.json"),
        "-o",
        "json",
    )
    assert code == 0, out
    assert got_reasons(out) == {f"serves release {R1}", f"serves release {R2}"}


def got_reasons(out: str) -> set[str]:
    return {r["reason"] for r in results(out).values()}


def test_concrete_first_then_the_template(two_releases, tmp_path: Path) -> None:
    """1.4.1 from a concrete file elsewhere; the template directory holds only 1.4.2."""
    old, new = two_releases
    concrete = tmp_path / "pinned" / "release-one.json"
    concrete.parent.mkdir()
    shutil.copy(old.release_dir / f"{R1}.json", concrete)
    templated = tmp_path / "releases"
    templated.mkdir()
    shutil.copy(old.release_dir / f"{R2}.json", templated / f"{R2}.json")
    code, out, _ = verify(
        *targets(old, new),
        "--release-manifest",
        str(templated / "{version}.json"),
        "--release-manifest",
        str(concrete),
        "-o",
        "json",
    )
    assert code == 0, out
    assert got_reasons(out) == {f"serves release {R1}", f"serves release {R2}"}


def test_a_manifest_is_never_used_for_another_version(two_releases) -> None:
    """1.4.1's file alone: the 1.4.2 instance is inconclusive, never 'differs from 1.4.2'."""
    old, new = two_releases
    code, out, _ = verify(
        *targets(old, new), "--release-manifest", str(old.release_dir / f"{R1}.json"), "-o", "json"
    )
    assert code == 3, out
    bad = results(out)[new.instances[0].url]
    assert bad["verdict"] == "inconclusive"
    assert f"no release manifest declares version {R2}" in bad["reason"]
    assert f"declares {R1}" in bad["reason"]
    assert not [f for f in bad["findings"] if f["kind"] == "content-differs"]
    assert [results(out)[i.url]["verdict"] for i in old.instances] == ["consistent"] * 2


def test_a_template_expansion_declaring_another_version_is_refused(
    two_releases, tmp_path: Path
) -> None:
    old, new = two_releases
    (tmp_path / f"{R1}.json").write_bytes((old.release_dir / f"{R1}.json").read_bytes())
    # an operator's copy error: 1.4.2's name, 1.4.1's manifest
    (tmp_path / f"{R2}.json").write_bytes((old.release_dir / f"{R1}.json").read_bytes())
    code, out, _ = verify(
        *targets(old, new), "--release-manifest", str(tmp_path / "{version}.json"), "-o", "json"
    )
    assert code == 3, out
    bad = results(out)[new.instances[0].url]
    assert bad["verdict"] == "inconclusive"
    assert f"declares version {R1}, not {R2}" in bad["reason"]
    assert not [f for f in bad["findings"] if f["kind"] == "content-differs"]


def test_two_files_declaring_one_version_is_a_config_error(quiet, tmp_path: Path) -> None:
    fleet, web = quiet
    copy = tmp_path / "copy.json"
    shutil.copy(fleet.release_dir / f"{R1}.json", copy)
    code, _, err = verify(
        *targets(fleet),
        "--release-manifest",
        str(fleet.release_dir / f"{R1}.json"),
        "--release-manifest",
        str(copy),
    )
    assert code == 2, err
    assert "--release-manifest" in err and f"both declare version {R1}" in err
    assert requests_to(web) == 0


def test_two_templates_are_a_config_error(quiet, tmp_path: Path) -> None:
    fleet, web = quiet
    code, _, err = verify(
        *targets(fleet),
        "--release-manifest",
        str(tmp_path / "a" / "{version}.json"),
        "--release-manifest",
        str(tmp_path / "b" / "{version}.json"),
    )
    assert code == 2, err
    assert "--release-manifest" in err and "at most one '{version}' template" in err
    assert requests_to(web) == 0


# --------------------------------------------------------------------- hostile versions


def _release_tree(tmp_path: Path) -> Path:
    """releases/1.4.1.json inside, and a 'release-1.4.1' manifest just outside it."""
    inside = tmp_path / "releases"
    inside.mkdir()
    data = native.dump(native.build(RELEASES[R1], version=R1))
    (inside / f"{R1}.json").write_bytes(data)
    (tmp_path / "release-1.4.1.json").write_bytes(data)
    return inside


@pytest.mark.parametrize("reported", ["../release-1.4.1", "1.4.1?a", "1.4.1/../1.4.1", "%2e%2e"])
def test_a_hostile_reported_version_is_never_looked_up(
    web: WebFleet, tmp_path: Path, reported: str
) -> None:
    inside = _release_tree(tmp_path)
    site = Site(root=RELEASES[R1], version=reported)
    url = web.add(site, "127.93.0.1")
    code, out, err = verify(
        "--target",
        url,
        "--version-endpoint",
        "/version#/version",
        "--release-manifest",
        str(inside / "{version}.json"),
        "-o",
        "json",
    )
    result = results(out)[url]
    assert result["verdict"] != "consistent", out
    assert code != 0
    assert "not a version" in out


def test_a_hostile_version_never_reaches_a_url_template(web: WebFleet) -> None:
    release = native.dump(native.build(RELEASES[R1], version=R1))
    source = web.add(Site(overrides={f"r/{R1}.json": release}), "127.93.1.2")
    instance = web.add(Site(root=RELEASES[R1], version=f"{R1}?a"), "127.93.1.1")
    code, out, _ = verify(
        "--target",
        instance,
        "--version-endpoint",
        "/version#/version",
        "--release-manifest",
        source + "r/{version}.json",
        "-o",
        "json",
    )
    assert results(out)[instance]["verdict"] != "consistent"
    assert code != 0
    assert web.server(source).received == [], "the hostile version caused a request"


def test_a_url_template_finds_a_version_with_a_plus(web: WebFleet) -> None:
    """``+`` passes the grammar; escaped (%2B) it still names the release's file."""
    version = "1.4.1+b7"
    release = native.dump(native.build(RELEASES[R1], version=version))
    source = web.add(Site(overrides={f"r/{version}.json": release}), "127.93.2.2")
    instance = web.add(Site(root=RELEASES[R1]), "127.93.2.1")
    code, out, _ = verify(
        "--target", f"{instance}={version}", "--release-manifest", source + "r/{version}.json"
    )
    paths_seen = [r.path for r in web.server(source).received]
    assert paths_seen == [f"/r/{version}.json"], paths_seen
    assert code == 0, out


def test_a_symlink_out_of_the_template_directory_is_refused(web: WebFleet, tmp_path: Path) -> None:
    inside = _release_tree(tmp_path)
    (inside / f"{R1}.json").unlink()
    (inside / f"{R1}.json").symlink_to(tmp_path / "release-1.4.1.json")
    url = web.add(Site(root=RELEASES[R1]), "127.93.3.1")
    code, out, _ = verify(
        "--target",
        f"{url}={R1}",
        "--release-manifest",
        str(inside / "{version}.json"),
        "-o",
        "json",
    )
    assert code == 3, out
    assert "outside the template's directory" in results(out)[url]["reason"]


# --------------------------------------------------------------------- names-only manifests


def _vite_release(tmp_path: Path) -> Path:
    """releases/1.4.1/.vite/manifest.json: Vite's own manifest, names without hashes."""
    target = tmp_path / "releases" / R1 / ".vite"
    target.mkdir(parents=True)
    shutil.copy(RELEASES[R1] / ".vite" / "manifest.json", target / "manifest.json")
    return tmp_path / "releases"


def test_a_hashless_release_manifest_is_refused_before_any_request(quiet) -> None:
    fleet, web = quiet
    vite = RELEASES[R1] / ".vite" / "manifest.json"
    code, _, err = verify(*targets(fleet), "--release-manifest", str(vite))
    assert code == 2, err
    assert "--release-manifest" in err and "manifest build" in err
    assert "--allow-names-only" in err
    assert requests_to(web) == 0


def test_a_hashless_template_expansion_is_inconclusive(make_fleet, tmp_path: Path) -> None:
    fleet = make_fleet(1, version=R1)
    releases = _vite_release(tmp_path)
    code, out, _ = verify(
        *targets(fleet),
        "--release-manifest",
        str(releases / "{version}" / ".vite" / "manifest.json"),
        "-o",
        "json",
    )
    assert code == 3, out
    assert "cannot vouch for the bytes" in results(out)[fleet.instances[0].url]["reason"]


def test_names_only_never_passes_other_bytes_under_the_same_names(
    make_fleet, tmp_path: Path
) -> None:
    """The outage this tool exists for: release 2's bytes under release 1's names."""
    fleet = make_fleet(2, version=R1)
    fleet.drift(1, serves=R2)
    releases = _vite_release(tmp_path)
    code, out, _ = verify(
        *targets(fleet),
        "--release-manifest",
        str(releases / "{version}" / ".vite" / "manifest.json"),
        "--allow-names-only",
        "-o",
        "json",
    )
    doc = json.loads(out)
    drifted = results(out)[fleet.instances[1].url]
    assert not (code == 0 and drifted["verdict"] == "consistent"), out
    assert doc.get("names_only") is True, "the report must say only names were compared"


# --------------------------------------------------------------------- typos: exit 2 first


@pytest.mark.parametrize(
    ("extra", "flag", "problem"),
    [
        (["--release-manifest", "nothere.json"], "--release-manifest", "cannot read"),
        (["--release-manifest", "/nonexistent/dir/{version}.json"], "--release-manifest", "exist"),
        (["-o", "junit=/nonexistent/x.xml"], "--output", "does not exist"),
        (["-o", "json", "-o", "junit"], "--output", "standard output"),
        (["-o", "table", "-o", "json"], "--output", "standard output"),
        (["-o", "json=a.json", "-o", "junit=a.json"], "--output", "twice"),
        (["-o", "yaml"], "--output", "expected table, json, junit or markdown"),
        (["--cdn", "cdn.example.com"], "--cdn", "http:// or https://"),
        (["--config", "missing.yaml"], "--config", "does not exist"),
        (["--concurrency", "0"], "--concurrency", "greater than or equal to 1"),
        (["--deadline", "-1"], "--deadline", "greater than 0"),
        (["--sample-assets", "-1"], "--sample-assets", "greater than or equal to 0"),
        (["--desired-version", "../x"], "--desired-version", "not a version"),
        (["--known-version", "1.0/.."], "--known-version", "not a version"),
        (["--manifest-format", "yarn"], "--manifest-format", "Input should be"),
        (["--header", "X-A=b\r\nX-Injected: yes"], "--header", "control character"),
        (["--header-file", "X-Token=/nonexistent/token"], "--header-file", "no such file"),
        (["--ca-bundle", "/nonexistent/ca.pem"], "--ca-bundle", "does not exist"),
        (
            ["--release-image", "web:{version}", "--release-manifest", "x/{version}.json"],
            "--release-image",
            "give one kind of release source, not manifests and image",
        ),
        (["--cdn", "http://a/", "--cdn", "http://b/"], "--cdn", "given 2 times"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_typos_are_exit_2_naming_the_flag_before_any_request(
    quiet,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
    flag: str,
    problem: str,
) -> None:
    fleet, web = quiet
    monkeypatch.chdir(tmp_path)
    template = str(fleet.release_dir / "{version}.json")
    base = ["--release-manifest", template] if "--release-manifest" not in extra else []
    code, out, err = verify(*targets(fleet), *base, *extra)
    assert code == 2, (out, err)
    assert flag in err and problem in err, err
    assert "Traceback" not in err
    assert requests_to(web) == 0, "a configuration error must be found before any request"
    assert not list(tmp_path.iterdir()), "nothing written"


def test_invalid_json_in_a_release_manifest_names_the_file(quiet, tmp_path: Path) -> None:
    fleet, web = quiet
    broken = tmp_path / "release-1.4.1.json"
    broken.write_text('{"schema": "artifactcheck/release-manifest/v1", "files": {', "utf-8")
    code, _, err = verify(*targets(fleet), "--release-manifest", str(broken))
    assert code == 2
    assert str(broken) in err and "--release-manifest" in err and "JSON" in err, err
    assert requests_to(web) == 0


def test_a_config_file_value_is_named_by_its_field(quiet, tmp_path: Path) -> None:
    """No flag set it, so the message names the YAML field the user wrote."""
    fleet, _ = quiet
    config = tmp_path / "check.yaml"
    config.write_text("http:\n  max_connections: 0\n", "utf-8")
    code, _, err = verify(*targets(fleet), "--config", str(config))
    assert code == 2
    assert "http.max_connections" in err and "--concurrency" not in err


def test_a_template_without_version_is_one_concrete_file(two_releases) -> None:
    """Given for a fleet of two versions, it judges only the version it declares."""
    old, new = two_releases
    code, out, _ = verify(
        *targets(old, new), "--release-manifest", str(old.release_dir / f"{R2}.json"), "-o", "json"
    )
    assert code == 3
    assert {results(out)[i.url]["verdict"] for i in old.instances} == {"inconclusive"}
    assert results(out)[new.instances[0].url]["verdict"] == "consistent"


# --------------------------------------------------------------------- every option


def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*prefix, name))
        else:
            yield (*prefix, name), cmd


SINGLE = [
    pytest.param(path, opt, id=f"{' '.join(path)} {opt.opts[-1]}")
    for path, cmd in _commands(main)
    for opt in cmd.params
    if isinstance(opt, click.Option) and not (opt.multiple or opt.count) and opt.name != "help"
]


@pytest.mark.parametrize(("path", "option"), SINGLE)
def test_a_repeated_single_value_option_is_refused(path: tuple[str, ...], option) -> None:
    assert isinstance(option, SingleValueOption)
    spelling = option.opts[-1]
    given = [spelling] if option.is_flag else [spelling, "1"]
    result = CliRunner().invoke(main, [*path, *given, *given])
    assert result.exit_code == 2, result.output
    assert "given 2 times" in result.output


def test_opposite_boolean_flags_are_a_repeat_too() -> None:
    result = CliRunner().invoke(main, ["demo", "--kubernetes", "--no-kubernetes"])
    assert result.exit_code == 2 and "given 2 times" in result.output


def test_repeatable_options_keep_every_value() -> None:
    verify_cmd = main.commands["verify"]
    multiple = {o.opts[-1] for o in verify_cmd.params if getattr(o, "multiple", False)}
    assert {"--release-manifest", "--target", "--known-version", "--output"} <= multiple


@pytest.mark.parametrize(
    ("path", "cmd"), [pytest.param(p, c, id=" ".join(p)) for p, c in _commands(main)]
)
def test_every_flag_has_help_text(path: tuple[str, ...], cmd: click.Command) -> None:
    missing = [
        o.opts[-1]
        for o in cmd.params
        if isinstance(o, click.Option) and not o.hidden and not o.help
    ]
    assert not missing, f"{' '.join(path)}: no help for {missing}"


def test_verify_help_lists_the_exit_codes() -> None:
    code, out, _ = run("verify", "--help")
    assert code == 0
    flat = " ".join(out.split())
    for line in ("0 every checked instance is consistent", "1 something served is wrong"):
        assert line in flat
    assert "2 usage or configuration error" in flat and "3 inconclusive" in flat
    assert "--allow-names-only" in out and "--known-version" in out


# --------------------------------------------------------------------- outputs


def test_table_to_a_file_and_a_summary_on_stderr(make_fleet, tmp_path: Path) -> None:
    fleet = make_fleet(2, version=R1)
    table, junit = tmp_path / "report.txt", tmp_path / "report.xml"
    code, out, err = verify(
        *targets(fleet),
        "--release-manifest",
        fleet.release_template,
        "-o",
        f"table={table}",
        "-o",
        f"junit={junit}",
    )
    assert code == 0, err
    assert out == ""
    text = table.read_text("utf-8")
    assert fleet.instances[0].url in text and "consistent" in text
    assert ET.parse(junit).getroot().get("tests") == "2"
    assert "2 instances: 2 consistent; exit 0" in err


def test_junit_to_a_file_alone_still_says_what_happened(make_fleet, tmp_path: Path) -> None:
    fleet = make_fleet(2, version=R1)
    fleet.drift(0, serves=R2)
    junit = tmp_path / "report.xml"
    code, out, err = verify(
        *targets(fleet), "--release-manifest", fleet.release_template, "-o", f"junit={junit}"
    )
    assert code == 1
    assert out == ""
    assert "1 consistent" in err and "1 mismatch" in err and "exit 1" in err
    assert len(err.strip().splitlines()) == 1


def test_json_to_stdout_and_junit_to_a_file(make_fleet, tmp_path: Path) -> None:
    fleet = make_fleet(1, version=R1)
    junit = tmp_path / "r.xml"
    code, out, err = verify(
        *targets(fleet),
        "--release-manifest",
        fleet.release_template,
        "-o",
        "json",
        "-o",
        f"junit={junit}",
    )
    assert code == 0
    assert json.loads(out)["counts"]["consistent"] == 1
    assert junit.exists() and err == ""


# --------------------------------------------------------------------- manifest build


def test_manifest_build_of_an_empty_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "dist").mkdir()
    out = tmp_path / "release.json"
    code, stdout, err = run(
        "manifest", "build", str(tmp_path / "dist"), "--version", "1", "-o", str(out)
    )
    assert code == 2
    assert "no files" in err
    assert not out.exists() and stdout == ""


def test_manifest_build_refuses_a_version_instances_could_never_report(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("x", "utf-8")
    code, stdout, err = run("manifest", "build", str(tmp_path), "--version", "../1")
    assert code == 2 and "not a version" in err and stdout == ""


def test_release_manifests_from_the_config_and_flags_add_up(two_releases, tmp_path: Path) -> None:
    """A YAML ``release: {manifests: one.json}`` (a string) plus a flag: both are used."""
    old, new = two_releases
    config = tmp_path / "check.yaml"
    config.write_text(f"release:\n  manifests: {old.release_dir / f'{R1}.json'}\n", "utf-8")
    code, out, _ = verify(
        *targets(old, new),
        "--config",
        str(config),
        "--release-manifest",
        str(old.release_dir / f"{R2}.json"),
        "-o",
        "json",
    )
    assert code == 0, out
    assert got_reasons(out) == {f"serves release {R1}", f"serves release {R2}"}


def test_a_bad_flag_value_reads_like_the_command_line() -> None:
    code, _, err = verify("--target", "http://127.0.0.1:9/", "--concurrency", "0")
    assert code == 2
    assert "--concurrency 0: Input should be greater than or equal to 1" in err
    assert "max_connections" not in err


def test_a_header_value_is_never_echoed() -> None:
    code, _, err = verify("--target", "http://127.0.0.1:9/", "--header", "X-Token=s3cret\r\nX: y")
    assert code == 2 and "--header" in err and "s3cret" not in err


def test_every_concrete_release_given_can_name_what_is_served(
    web: WebFleet, tmp_path: Path
) -> None:
    """An instance reporting 1.4.1 that serves all of 1.4.2: named without --known-version."""
    for version in (R1, R2):
        data = native.dump(native.build(RELEASES[version], version=version))
        (tmp_path / f"{version}.json").write_bytes(data)
    url = web.add(Site(root=RELEASES[R2]), "127.93.4.1")
    code, out, _ = verify(
        "--target",
        f"{url}={R1}",
        "--release-manifest",
        str(tmp_path / f"{R1}.json"),
        "--release-manifest",
        str(tmp_path / f"{R2}.json"),
        "-o",
        "json",
    )
    assert code == 1
    bad = results(out)[url]
    assert bad["verdict"] == "mismatch" and bad["serves_version"] == R2, bad["reason"]


def test_controller_with_an_invalid_admin_config_is_exit_2_naming_the_field(tmp_path) -> None:
    """A typo in the cluster admin's configuration stops the controller before it starts,
    naming the file and the field (exit 2), instead of a traceback or a silent default."""
    from click.testing import CliRunner

    from artifactcheck.cli.main import main

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        'clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]\n'
        "users: [{name: u, user: {}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
    )
    admin = tmp_path / "admin.yaml"
    admin.write_text("egress:\n  allow_loopbak: true\n")
    result = CliRunner().invoke(
        main, ["controller", "--kubeconfig", str(kubeconfig), "--admin-config", str(admin)]
    )
    assert result.exit_code == 2, result.output
    assert str(admin) in result.output and "egress.allow_loopbak" in result.output


def test_a_camelcase_config_file_is_overridden_by_its_flag(tmp_path: Path) -> None:
    """A --config file may spell fields as an ArtifactCheck does (camelCase): a flag for
    the same field overrides it, and the two spellings of one field together are exit 2."""
    from artifactcheck.cli.options import build_spec

    cfg = tmp_path / "check.yaml"
    cfg.write_text('targets: [{url: "http://127.0.0.1:9/"}]\nhttp: {maxConnections: 5}\n')
    assert build_spec(str(cfg), {}).http.max_connections == 5
    assert build_spec(str(cfg), {"http.max_connections": 10}).http.max_connections == 10
    both = tmp_path / "both.yaml"
    both.write_text(
        'targets: [{url: "http://127.0.0.1:9/"}]\nhttp: {maxConnections: 5, max_connections: 3}\n'
    )
    code, _, err = verify("--config", str(both))
    assert code == 2 and "http.maxConnections and http.max_connections" in err, err


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"\xff\xfe\x00garbage", "not UTF-8 text"),
        (b"targets: " + b"[" * 5000 + b"]" * 5000, "nested too deeply"),
        (b"targets: [\n", "not valid YAML"),
        (b"- just\n- a list\n", "expected a mapping at the top level"),
        (b"targets: !!python/object/apply:os.system [ls]\n", "not valid YAML"),
    ],
    ids=["not-utf8", "deep", "broken", "list", "python-tag"],
)
def test_a_bad_config_file_is_the_same_error_from_the_cli_and_load_spec_file(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    """--config and load_spec_file read spec files with one reader: the same message,
    naming the file, and exit 2 before any request."""
    from artifactcheck.model.errors import ConfigError
    from artifactcheck.model.settings import load_spec_file

    cfg = tmp_path / "check.yaml"
    cfg.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        load_spec_file(cfg)
    assert str(caught.value).startswith(f"{cfg}: {problem}"), caught.value
    code, _out, err = verify("--config", str(cfg))
    assert code == 2
    assert f"artifactcheck: error: {caught.value}" in err
