"""Every wrong-verdict class found by trying artifactcheck as a user and as an adversary,
with the test that pins the rule which prevents it.

The table is rendered into docs/reliability.md (by ``tests/faults/matrix.py`` with the
rest of that page, or alone with ``python tests/verdict_classes.py``), and
``tests/core/test_verdict_classes.py`` fails when a listed test no longer exists or the
page does not show the table as it is here: a class without a defending test, or a
document that drifted from the suite, is caught by the suite itself.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "reliability.md"
START = "<!-- verdict-classes:start -->"
END = "<!-- verdict-classes:end -->"

#: (class, the rule now, the tests that fail when the rule is broken)
CLASSES: list[tuple[str, str, tuple[str, ...]]] = [
    (
        "several release manifests: the last one silently kept",
        "each concrete manifest is indexed by the version it declares; a repeated "
        "single-value option is exit 2",
        (
            "tests/e2e/test_cli_config.py::test_two_concrete_manifests_judge_each_instance_by_its"
            "_version",
            "tests/e2e/test_cli_config.py::test_a_repeated_single_value_option_is_refused",
        ),
    ),
    (
        "the version a release manifest declares ignored",
        "a manifest is used only for the version it declares; parsing never overwrites it",
        (
            "tests/e2e/test_cli_config.py::test_a_manifest_is_never_used_for_another_version",
            "tests/manifests/test_native.py::test_a_declared_version_is_never_overwritten",
        ),
    ),
    (
        "the reported version chose its own expectation (`../release-1.1.0`, `1.0.0?a`)",
        "a reported version must match the version grammar before any lookup, is escaped "
        "in URLs and confined to the template's directory",
        (
            "tests/e2e/test_cli_config.py::test_a_hostile_version_never_reaches_a_url_template",
            "tests/core/test_expect.py::test_url_expansion_escapes_the_version",
            "tests/core/test_compare.py::test_invalid_version_is_never_looked_up",
        ),
    ),
    (
        "a release manifest without hashes vouched for bytes",
        "hashless release sources are refused (exit 2) unless `--allow-names-only`, and "
        "then never claim bytes",
        (
            "tests/e2e/test_cli_config.py::test_names_only_never_passes_other_bytes_under_the_sam"
            "e_names",
        ),
    ),
    (
        "release files the served manifest does not reference skipped; a 404 served "
        "manifest silently replaced",
        "every release file is compared or listed as not compared with the reason; a "
        "missing served manifest is a finding",
        (
            "tests/e2e/test_observation.py::test_a_release_file_the_served_manifest_does_not_refe"
            "rence_is_compared",
            "tests/e2e/test_observation.py::test_a_served_manifest_answering_404_is_recorded_and_"
            "the_release_still_fetched",
            "tests/core/test_compare.py::test_every_release_file_is_accounted_for",
        ),
    ),
    (
        "the CDN check demanded the origin's HTML",
        "only files matching `cdn_include` and not `cdn_exclude` (HTML by default) are "
        "asked of the CDN",
        (
            "tests/e2e/test_observation.py::test_the_cdn_is_asked_only_for_what_it_should_hold",
            "tests/core/test_compare.py::test_cdn_paths_default_excludes_html",
        ),
    ),
    (
        "consensus with nobody to agree with",
        "consensus needs two instances reporting the version; one alone is inconclusive",
        (
            "tests/core/test_compare.py::test_consensus_of_one_is_inconclusive",
            "tests/core/test_compare.py::test_consensus_of_one_per_version_is_inconclusive",
        ),
    ),
    (
        "gate mode let the one bad pod in while the release source was down",
        "only pods with no evidence against them fail open; a pod with a bad verdict stays out",
        (
            "tests/core/test_policy_gate.py::test_gate_mode_with_the_release_source_down_keeps_th"
            "e_bad_pod_out",
        ),
    ),
    (
        "naming one of several matching releases, sorted as strings",
        "another release is named only when exactly one matches every compared file",
        (
            "tests/core/test_compare.py::test_release_of_exactly_one",
            "tests/core/test_compare.py::test_a_mix_of_two_other_releases_names_neither",
            "tests/core/test_compare.py::test_version_key_orders_numbers_as_numbers",
        ),
    ),
    (
        "files on another host called different",
        "references under the CDN's URL are checked on the CDN; others are not compared, "
        "never different",
        (
            "tests/e2e/test_observation.py::test_references_by_the_cdn_url_are_checked_on_the_cdn",
            "tests/core/test_compare.py::test_off_host_not_compared_finding",
        ),
    ),
    (
        "a probe's 403 hid drift (and was labelled unreachable)",
        "403 on a probed name is 'not here'; an instance that answered is never unreachable",
        (
            "tests/e2e/test_observation.py::test_a_403_probe_is_not_here_and_the_next_name_is_tri"
            "ed",
            "tests/e2e/test_observation.py::test_a_connection_failing_after_answers_is_not_unreac"
            "hable",
        ),
    ),
    (
        "sampling silent and never varying",
        "the sample varies by default, its seed is reported, 'serves release X' only when "
        "every file was compared",
        (
            "tests/e2e/test_observation.py::test_sampling_varies_between_runs_and_is_reproducible",
            "tests/e2e/test_reports.py::test_table_and_junit_say_what_was_compared_and_sampled",
        ),
    ),
    (
        "what browsers receive never checked (stale `gzip_static`)",
        "each coding in `--compare-encoding` is fetched, decoded and compared; reports say "
        "which codings were compared",
        (
            "tests/e2e/test_encodings.py::test_a_stale_precompressed_file_is_caught_when_gzip_is_"
            "compared",
            "tests/e2e/test_encodings.py::test_the_compare_encoding_flag_catches_the_stale_gz_fro"
            "m_the_cli",
        ),
    ),
    (
        "reports that said the opposite (CDN orientation, mixes, JUnit counts, unshipped schema)",
        "expected is the release's hash; a mix is a mix; JUnit counts its cases and outages "
        "are errors; every JSON output validates against the shipped schema",
        (
            "tests/core/test_compare.py::test_cdn_differs_orientation_and_message",
            "tests/core/test_compare.py::test_a_mix_of_unknown_bytes_is_content_differs",
            "tests/e2e/test_reports.py::test_junit_counts_outages_as_errors_and_keeps_versions_ou"
            "t_of_packages",
            "tests/e2e/test_reports.py::test_an_expiring_certificate_shows_in_table_and_junit",
        ),
    ),
    (
        "a typo passed CI (missing files exit 3, unwritable outputs after the run)",
        "misconfiguration is exit 2 naming the flag, before any request",
        ("tests/e2e/test_cli_config.py::test_typos_are_exit_2_naming_the_flag_before_any_request",),
    ),
    (
        "a missing file answered with the SPA's index.html called different",
        "a fallback page is a missing file, on the instance and on the CDN",
        (
            "tests/core/test_compare.py::test_fallback_page_message_says_index_html",
            "tests/core/test_compare.py::test_served_manifest_file_listed_but_fallback_is_missing",
        ),
    ),
    (
        "one instance ended the run (1,200 stacked codings, 5,000-digit Content-Length, "
        "`Location: http://[`)",
        "codings capped, numbers bounded, Locations validated; any exception in one "
        "instance is its inconclusive",
        (
            "tests/fetch/test_fetch_rawsocket.py::test_a_long_content_encoding_chain_is_a_protoco"
            "l_error",
            "tests/fetch/test_fetch_rawsocket.py::test_a_content_length_of_5000_digits_is_a_proto"
            "col_error",
            "tests/fetch/test_fetch_rawsocket.py::test_an_unusable_location_is_that_fetch_s_error",
            "tests/faults/test_instance_faults.py::test_an_exception_in_one_instance_is_its_incon"
            "clusive",
            "tests/faults/test_instance_faults.py::test_verify_exit_code_is_the_verdicts_when_one"
            "_instance_raises",
        ),
    ),
    (
        "header injection through `http.host_header`",
        "every header name and value is checked at load (RFC 9110) and again on the wire",
        (
            "tests/fetch/test_fetch_rawsocket.py::test_a_host_header_with_a_line_break_is_never_s"
            "ent",
        ),
    ),
    (
        "keep-alive desync: a forged response taken as the next answer",
        "a connection is reused only when its socket has nothing pending; unsolicited "
        "bytes condemn it",
        (
            "tests/fetch/test_fetch_rawsocket.py::test_a_forged_response_after_a_404_is_not_the_n"
            "ext_answer",
            "tests/fetch/test_fetch_rawsocket.py::test_shifted_answers_one_request_at_a_time",
        ),
    ),
    (
        "transfer codings hashed as content; `..;` requested; status 099 skipped",
        "only one `chunked` transfer coding; dot segments with parameters refused; "
        "impossible statuses are protocol errors",
        (
            "tests/fetch/test_fetch_rawsocket.py::test_transfer_codings_are_never_hashed_as_conte"
            "nt",
            "tests/fetch/test_fetch_rawsocket.py::test_servlet_dot_dot_segments_are_refused_witho"
            "ut_a_request",
            "tests/fetch/test_fetch_rawsocket.py::test_an_impossible_status_is_a_protocol_error",
        ),
    ),
    (
        "a crash in `verify` exited 1, the code CI reads as a mismatch; a release source "
        "that raised ended the run",
        "an uncaught exception exits 3 (internal error, nothing judged); a release that "
        "raises is missing, its instances inconclusive",
        (
            "tests/e2e/test_verify.py::test_a_bug_exits_inconclusive_never_as_a_mismatch",
            "tests/e2e/test_observe_processes.py::test_a_release_that_raises_fails_its_instances_"
            "not_the_run",
        ),
    ),
    (
        '`--version-endpoint /version` on `{"version":"1.0.0"}`: the whole JSON body '
        "taken as the version, `signal-conflict`, exit 1 on a correct fleet",
        "without a JSON pointer a JSON body is read at its `version` member and the report "
        "says so; no such member, an HTML page or a non-version is `inconclusive` with the "
        "hint `/version#/version`, shown in the table",
        (
            "tests/e2e/test_reported_versions.py::test_a_json_body_without_a_pointer_is_read_at_i"
            "ts_version_member",
            "tests/e2e/test_reported_versions.py::test_no_readable_version_is_inconclusive_with_t"
            "he_reason_in_the_table",
            "tests/e2e/test_reported_versions.py::test_an_endpoint_error_is_in_the_table_not_only"
            "_in_json",
        ),
    ),
    (
        "an invalid reported version exited 1 (`signal-conflict`) where the docs said "
        "`inconclusive`",
        "an invalid version judges nothing: `inconclusive` (exit 3) before any other rule, "
        "never flagged or quarantined; an endpoint value outside the grammar is no version",
        (
            "tests/core/test_verified.py::test_an_invalid_reported_version_is_inconclusive_and_ne"
            "ver_acted_on",
            "tests/core/test_compare.py::test_invalid_version_is_never_looked_up",
            "tests/e2e/test_reported_versions.py::test_an_invalid_endpoint_answer_beside_a_given_"
            "version_is_shown_not_a_conflict",
        ),
    ),
    (
        "Angular's `ngsw.json` refused as a release source (exit 2, no content hash) though "
        "every file has the SHA-1 its service worker enforces",
        "an ngsw.json vouches by SHA-1, compared and named `sha1` in coverage and findings; "
        "its version is `appData.version`, else a concrete file is exit 2 saying how to give one",
        (
            "tests/e2e/test_ngsw_release.py::test_a_template_of_ngsw_manifests_vouches_by_sha1",
            "tests/e2e/test_ngsw_release.py::test_a_file_whose_sha1_differs_is_a_mismatch_named_s"
            "ha1",
            "tests/e2e/test_ngsw_release.py::test_a_concrete_ngsw_declaring_app_data_version_is_u"
            "sed_for_that_version_only",
            "tests/core/test_sha1_release.py::test_sha1_release",
        ),
    ),
    (
        'a partial match (a file fallen back to the entry page) said "serves release X"',
        '"serves release X" only when every compared file is X\'s and none fell back',
        (
            "tests/e2e/test_partial_match_wording.py::test_one_file_fallen_back_is_not_serving_th"
            "e_other_release",
            "tests/layouts/test_layout_vue.py::test_a_partial_build_is_never_called_a_release",
        ),
    ),
    (
        "Django as deployed (targets at the root, files under `/static/`): a correct fleet "
        "exit 1, every instance `mismatch`; the CDN asked for `/static/static/...`",
        "the prefix between a release's paths and the instance is detected or set "
        "(`--prefix`); nothing of the release where it was looked for is `inconclusive` "
        "naming the prefix to use, never `mismatch`; the CDN URL's path is its own base",
        (
            "tests/layouts/test_layout_django.py::test_a_correct_django_fleet_is_consistent",
            "tests/e2e/test_layouts_prefix.py::test_a_wrong_prefix_is_inconclusive_naming_the_rig"
            "ht_one",
        ),
    ),
    (
        "`--cdn` given without the prefix the CDN serves the files under: every file "
        "`cdn-missing`, exit 1",
        "when every file asked of the CDN is missing there and found under the instances' "
        "prefix, the CDN is not judged and the reason names the `--cdn` to give; a CDN "
        "missing the release everywhere stays `cdn-missing`",
        (
            "tests/layouts/test_layout_django.py::test_a_cdn_given_without_its_static_prefix_is_n"
            "ever_a_mismatch",
            "tests/layouts/test_layout_django.py::test_a_cdn_missing_the_release_everywhere_is_st"
            "ill_cdn_missing",
        ),
    ),
    (
        "a drifted instance judged by its release's file list (no served manifest) never "
        "named what it serves",
        "the files of the one other release the content matches that nobody asked for are "
        'fetched in one bounded round before "serves X" is said or refused',
        (
            "tests/layouts/test_layout_next.py::test_a_drifted_next_instance_alone_is_flagged",
            "tests/layouts/test_layout_next.py::test_swapped_next_instances_are_each_named",
        ),
    ),
    (
        "siblings whose manifest path all answered the same 403 page agreed: exit 0 with "
        "nothing compared",
        "a 403/404 page is not content: with no file served and no manifest read the verdict "
        "is `inconclusive`, naming what the manifest path answered",
        ("tests/layouts/test_layout_vue.py::test_siblings_that_fetched_nothing_never_agree",),
    ),
    (
        "`verify ... | head` (a reader that closes the pipe): any verdict became exit 1",
        "a closed standard output keeps the verdict's exit code; the summary goes to "
        "standard error",
        (
            "tests/layouts/test_layout_pipe.py::test_a_closed_pipe_never_turns_a_verdict_into_exi"
            "t_1",
        ),
    ),
    (
        "a release rebuilt under the same version, instances rebuilt too: exit 0",
        "`--pins`: the first release manifest seen for a version is pinned by its sha256; "
        "another one later is `release-changed` (exit 1) until `pins accept`",
        (
            "tests/e2e/test_release_trust.py::test_pins_catch_the_silent_rebuild_until_it_is_acce"
            "pted",
        ),
    ),
    (
        'whoever could write to the release source decided what "expected" means',
        "`--release-key`: only a manifest with a DSSE envelope signed by a known key, whose "
        "subject is the bytes loaded and whose version is the one declared, is trusted; "
        "anything else is `inconclusive`",
        ("tests/e2e/test_release_trust.py::test_only_a_release_signed_by_a_known_key_is_trusted",),
    ),
    (
        "a drifted pod the controller's fixed sample missed after its first look: "
        "observed once, never confirmed, never quarantined (the soak's 9 of 10)",
        "a sampled full cycle also observes, up to the sample's size, every pod whose "
        "last verdicts were bad, until it is confirmed or cleared",
        (
            "tests/k8s/test_controller.py::test_a_suspect_the_fixed_sample_misses_is_followed_up_"
            "until_quarantined",
        ),
    ),
    (
        "siblings agreeing on errors: no release, every file the served manifest lists "
        "answering 404 (or the SPA's index.html) on every instance, one serving another "
        'release\'s CSS: exit 0, each "agrees with its 2 sibling(s)"',
        "siblings agree only on content served (a 2xx body that is not the fallback page); "
        "404, 403, 5xx, a redirect, the fallback page, the served manifest or the entry "
        "page alone agree on nothing; an instance that shares no served file with a "
        "sibling, or a fleet where nothing was compared, is `inconclusive` (exit 3); a file "
        "most siblings serve and one lacks is that one's `mismatch`",
        (
            "tests/layouts/test_layout_consensus.py::test_siblings_agreeing_on_404s_or_the_fallba"
            "ck_page_agree_on_nothing",
            "tests/layouts/test_layout_consensus.py::test_a_file_missing_on_one_instance_is_its_m"
            "ismatch",
            "tests/core/test_ladder_consensus.py::test_siblings_sharing_no_served_file_agree_on_n"
            "othing",
            "tests/core/test_ladder_consensus.py::test_content_against_absence_is_a_difference_no"
            "t_agreement",
        ),
    ),
    (
        "a wrong `--manifest-path` answered with the site's index.html and 200 (Caddy and "
        "nginx `try_files`, lighttpd's `error-handler-404`): a correct fleet exits 1, "
        '"content differs: wrong/manifest.json" (not valid JSON)',
        "a served manifest's path answering the fallback page is absent, as a 404 says: "
        "the release's file list judges, and without a release it is `inconclusive` "
        "naming what was answered and what to give",
        (
            "tests/layouts/test_layout_caddy_lighttpd.py::test_a_wrong_manifest_path_on_an_spa_se"
            "rver_is_no_mismatch",
            "tests/core/test_served_manifest_fallback.py::test_with_a_release_the_files_still_jud"
            "ge_and_nothing_is_against_the_content",
        ),
    ),
    (
        "a Caddy site named by host, its instances reached by IP: Caddy answers every path "
        'with 200 and an empty body, and a correct fleet exits 1, "content differs"',
        "every release file asked for answering one body, the entry page included, that "
        "no known release holds is no build of the site: `inconclusive`, naming "
        "`--host-header` and the base URL",
        (
            "tests/layouts/test_layout_caddy_lighttpd.py::test_a_site_named_by_host_reached_by_ip"
            "_is_not_a_mismatch",
            "tests/core/test_ladder_content.py::test_one_body_for_every_path_is_not_the_site",
        ),
    ),
    (
        "a file stored compressed (Rails' `x.css.gz`, served with `Content-Encoding: gzip` as the"
        " asset-pipeline guides configure Apache): decoded, then compared with the sha256 of the "
        "compressed file; a correct fleet exits 1",
        "a file whose stored form is itself compressed is judged by the bytes as stored (or its "
        "decoded bytes against its decoded content); `manifest build` records `.gz`, `.br`, "
        "`.zst` siblings as encodings of their file, not as files",
        [
            "tests/layouts/test_layout_rails.py::test_a_correct_rails_fleet_is_consistent",
            "tests/layouts/test_layout_rails.py::test_a_release_listing_the_gz_files_is_judged_by"
            "_their_stored_bytes",
            "tests/layouts/test_layout_rails.py::test_manifest_build_records_the_gz_as_an_encodin"
            "g_of_its_file",
            "tests/fetch/test_fetch_stored_codings.py::test_what_is_hashed",
        ],
    ),
    (
        "`--compare-encoding identity --compare-encoding gzip` on an instance whose plain file "
        "was replaced and whose `.gz` was left stale: exit 0 in one flag order, exit 1 in the "
        "other",
        "every requested encoding is judged on its own; a file is right only when every encoding "
        "asked for is right; the order of flags never changes a verdict",
        [
            "tests/core/test_coding_order.py::test_against_the_release_every_coding_counts_in_eve"
            "ry_order",
            "tests/core/test_coding_order.py::test_no_order_changes_a_verdict",
            "tests/layouts/test_layout_encoding_order.py::test_with_a_release_both_orders_flag_th"
            "e_entry",
            "tests/layouts/test_layout_encoding_order.py::test_siblings_only_both_orders_find_the"
            "_minority",
        ],
    ),
    (
        "host-absolute manifest values (Symfony Encore's `/build/app.2c3f04b6.js`) resolved under"
        " the prefix (`/build/build/...`, 404): a correct fleet exits 1",
        "a manifest value that is an absolute path or URL resolves as a browser resolves it (RFC "
        "3986: against the origin, not the prefix); relative values against the manifest's "
        "directory",
        [
            "tests/layouts/test_layout_encore.py::test_a_correct_encore_fleet_under_build_is_cons"
            "istent",
            "tests/layouts/test_layout_encore.py::test_a_cdn_lacking_an_encore_file_is_cdn_missing",
            "tests/manifests/test_resolution.py::test_a_reference_resolves_where_a_browser_fetche"
            "s_it",
        ],
    ),
    (
        "`--manifest-path /assets/.sprockets-manifest-<hex>.json` (from the site root) read, then"
        ' `/assets/assets/...` asked: exit 3 "answers HTTP 404" for a path that answers 200; '
        "Laravel's `/build/manifest.json` re-resolved under the prefix detected from it",
        "`--manifest-path` starting with `/` is from the target's root, without `/` under the "
        "prefix; the manifest's own location is never re-resolved under a prefix detected from "
        "it; a message never claims a status the server did not send",
        [
            "tests/layouts/test_layout_manifest_path.py::test_a_sprockets_manifest_named_by_path_"
            "is_read_where_it_is",
            "tests/layouts/test_layout_manifest_path.py::test_a_missing_manifest_names_the_path_a"
            "sked_with_its_status",
            "tests/layouts/test_layout_manifest_path.py::test_an_encore_manifest_named_from_the_r"
            "oot_without_a_release",
        ],
    ),
    (
        "an unknown-format served manifest named by `--manifest-path` (Rsbuild's "
        '`output.manifest`): a correct fleet exits 1, "content differs: manifest.json"',
        "an unknown served manifest is never a finding against content: it is compared as a file "
        "(when the release lists it) or ignored with a note",
        [
            "tests/layouts/test_layout_manifest_path.py::test_an_unknown_served_manifest_named_by"
            "_path_is_compared_as_a_file",
        ],
    ),
]


def missing_tests(root: Path = HERE.parent) -> list[str]:
    """Listed tests that do not exist (file, or a ``def`` of that name in it)."""
    missing = []
    for _, _, tests in CLASSES:
        for node in tests:
            path, _, name = node.partition("::")
            file = root / path
            text = file.read_text(encoding="utf-8") if file.is_file() else ""
            if not re.search(rf"^(?:async )?def {re.escape(name)}\(", text, re.M):
                missing.append(node)
    return missing


def render() -> str:
    """The section of docs/reliability.md, between its markers."""
    lines = [
        START,
        "## Wrong verdicts, and the tests that pin them",
        "",
        "Each class of wrong verdict found by using artifactcheck as a user and attacking "
        "it as a hostile instance, the rule that now prevents it, and the tests that fail "
        "when the rule is broken (listed in `tests/verdict_classes.py`; the suite checks "
        "that each test exists and that this table is current).",
        "",
        "| wrong verdict seen | the rule now | pinned by |",
        "|---|---|---|",
    ]
    for seen, rule, tests in CLASSES:
        cells = "<br>".join(f"`{t}`" for t in tests)
        lines.append(f"| {seen} | {rule} | {cells} |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def splice(document: str) -> str:
    """``document`` with its verdict-class section replaced (or appended)."""
    section = render()
    if START in document and END in document:
        head, _, rest = document.partition(START)
        _, _, tail = rest.partition(END)
        return head + section.rstrip("\n") + tail
    return document.rstrip("\n") + "\n\n" + section


if __name__ == "__main__":
    DOC.write_text(splice(DOC.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the verdict-class table into {DOC}", file=sys.stderr)
