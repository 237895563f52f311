"""Suite-wide settings of our own tests: deterministic Hypothesis, and the two test tiers.

Hypothesis: ``derandomize=True`` draws the same examples on every run (a failure found once is found
again, and no run differs from the last by luck); ``database=None`` keeps nothing between runs;
``deadline=None`` because a loaded 2-core machine makes per-example wall time meaningless.

Tiers: the README's test command runs ``-m "not slow"`` (pyproject's addopts), the full suite adds
``-m "slow or not slow"``. A test is in the slow tier when it is marked ``slow`` in its module, or when it
is listed in :data:`SLOW` below: the tests that cost 5 s or more each in a measured run of the full suite
(coverage on, 2 xdist workers, 2 cores), which the fast tier protects with cheaper tests of the same
contract (the screen and oracle tests of every catalogued bug, quick-mode runs of every reference,
the contract and law-test units). What the fast tier keeps of the full suite is measured, not assumed:
coverage.py and ``benchmarks/fault_check.py`` (notes in the README's "Two commands" section). A listed
name that no longer matches a collected test is an error, so the list cannot silently rot.

Plans: the suite keeps its sample-size plans (:mod:`specdec_check.checker.core.plan_cache`) in a folder of its
own, made when this file is imported by the first process (xdist workers and the CLI's subprocesses inherit the
variable), never in the user's cache.
"""

import os
import tempfile

import pytest
from hypothesis import settings

os.environ.setdefault("SPECDEC_CHECK_CACHE_DIR", tempfile.mkdtemp(prefix="specdec-check-suite-plans-"))

settings.register_profile("specdec-check-suite", derandomize=True, database=None, deadline=None)
settings.load_profile("specdec-check-suite")

#: Test ids (a function, or one parametrized case) of the slow tier -> seconds measured in the full run.
SLOW = {
    "adapters/test_hf.py::test_generate_end_to_end_with_default_settings": 242,
    "adapters/test_hf.py::test_generate_joint_law": 9,
    "architecture/test_policy_across_kinds.py::test_each_robustness_case_gets_one_class_in_every_kind_and_strict_makes_it_a_failure[nan]": 7,
    "benchmarks/test_smoke.py::test_quick_run_prints_every_section": 243,
    "bugs/test_mutation_score.py::test_entry_in_default_mode": 865,
    "checker/test_block.py::test_reuse_keeps_the_first_token_test_on_fresh_drafts": 5,
    "checker/test_checker_suite.py::test_bonus_from_wrong_row_fails_with_law_or_impossible_finding": 8,
    "checker/test_checker_suite.py::test_controls_pass_default": 105,
    "checker/test_checker_suite.py::test_generator_ignored_fails_independence": 8,
    "checker/test_checker_suite.py::test_reference_generator_passes[default]": 16,
    "checker/test_checker_suite.py::test_reference_verifier_passes_default": 32,
    "checker/test_checker_suite.py::test_reference_verifier_passes_thorough_small": 40,
    "checker/test_checker_suite.py::test_target_call_per_token_is_inefficient": 17,
    "cli/test_cli_end_to_end.py::test_catalogued_bug_fails_with_evidence_and_a_repro_that_reproduces": 5,
    "cli/test_cli_end_to_end.py::test_same_seed_same_json": 6,
    "cli/test_cli_end_to_end.py::test_verify_torch_backend": 6,
    "cli/test_cli_hostile.py::test_a_hung_sampler_becomes_a_timeout_with_a_partial_report": 24,
    "cli/test_cli_hostile.py::test_a_sampler_that_ends_its_process_fails_with_a_crash_report": 43,
    "cli/test_cli_hostile.py::test_a_stray_non_daemon_thread_does_not_keep_the_cli_alive": 6,
    # the signal matrix's other diagonal (Ctrl-C to the group and SIGTERM to the CLI stay in the fast tier)
    "cli/test_cli_hostile.py::test_a_signal_writes_a_partial_report_marked_interrupted[SIGINT-to-cli]": 6,
    "cli/test_cli_hostile.py::test_a_signal_writes_a_partial_report_marked_interrupted[SIGTERM-to-process-group]": 6,
    "cli/test_cli_hostile.py::test_heartbeat_lines_on_a_non_terminal_stderr": 6,
    "cli/test_cli_hostile.py::test_on_a_terminal_the_bar_names_the_call_in_progress_and_no_heartbeat_lines": 7,
    "cli/test_cli_hostile.py::test_spawned_child_gives_the_same_verdicts": 11,
    "cli/test_cli_hostile.py::test_timeout_zero_disables_the_limit_and_bad_values_are_usage_errors": 9,
    "cli/test_cli_reports.py::test_another_run_needs_force_and_the_same_run_overwrites": 14,
    "cli/test_cli_reports.py::test_default_folders_of_two_packages_do_not_collide": 9,
    "cli/test_cli_trust.py::test_a_partial_sampler_and_an_odd_scenario_name_give_a_repro_that_reproduces": 9,
    "cli/test_cli_trust.py::test_an_exact_verifier_returning_one_static_buffer_passes": 12,
    "cli/test_cli_trust.py::test_bugs_that_passed_on_thin_evidence_no_longer_pass": 33,
    "cli/test_cli_trust.py::test_exact_verifiers_that_do_not_guard_nan_rows_pass_with_a_warning": 45,
    "cli/test_cli_trust.py::test_strict_turns_the_nan_warning_into_a_failure": 9,
    "cli/test_cli_trust.py::test_target_passes_through_last_probs_and_start_probs_are_counted": 7,
    "cli/test_cli_trust.py::test_thin_evidence_at_a_qwen2_vocabulary_is_inconclusive_with_the_achieved_resolution": 16,
    "plugin/test_plugin.py::TestParametrizeWithChecks::test_users_own_module": 6,
    "plugin/test_plugin.py::TestSelection::test_option_over_env_over_ini": 7,
    "plugin/test_plugin.py::TestSuite::test_a_sampler_that_ends_the_process_fails_the_item": 7,
    "plugin/test_plugin.py::TestSuite::test_ci_runs_are_deterministic": 29,
    "plugin/test_plugin.py::TestSuite::test_passes_on_the_references": 21,
    "plugin/test_plugin.py::TestSuite::test_residual_from_target_fails_with_evidence": 8,
    "ragged/test_ragged_checker.py::test_law_tests_are_calibrated_on_the_exact_reference": 9,
    "ragged/test_ragged_checker.py::test_ragged_catalogue_leaves_the_chain_score_alone": 10,
    "ragged/test_ragged_strategies_cli.py::test_cli_mutants_ragged": 11,
    "ragged/test_vllm_v1_adapter.py::test_a_greedy_sentinel_mismatch_is_caught_on_greedy_rows": 10,
    "ragged/test_vllm_v1_adapter.py::test_adapter_passes_the_fixture": 17,
    "ragged/test_vllm_v1_adapter.py::test_the_older_forward_with_bonus_tokens_outside": 16,
    "report/test_report_browser.py::test_report_renders_in_chromium": 5,
    "report/test_report_hostile.py::test_a_one_megabyte_name_renders_in_seconds": 7,
    "report/test_report_hostile.py::test_rendering_time_grows_linearly_when_the_report_grows_fourfold": 23,
    "report/test_report_sets.py::test_a_killed_writer_leaves_a_whole_set": 13,
    "report/test_report_sets.py::test_concurrent_writers_never_leave_a_mixed_set": 6,
    "rules/test_rule_any_checker.py::test_a_lossy_rule_fails_rule_any_with_bounds_that_contain_the_exact_tv[corpus-bigram]": 11,
    "scaleout/test_cli_scaleout.py::test_a_target_resolution_on_the_command_line": 9,
    "scaleout/test_cli_scaleout.py::test_the_suite_under_xdist_spends_one_budget_split_by_test_id": 30,
    "scaleout/test_cli_scaleout.py::test_workers_and_a_dask_scheduler_write_the_same_report": 15,
    "scaleout/test_lost_workers.py::test_a_dask_cluster_reschedules_the_lost_shard_and_gives_the_same_report": 9,
    "scaleout/test_reports_equal.py::test_dask_worker_processes_with_their_own_blas_settings_give_the_same_report": 9,
    "scaleout/test_reports_equal.py::test_generator_tree_and_ragged_reports_are_equal_on_two_processes": 17,
    "scaleout/test_reports_equal.py::test_rule_any_reports_are_equal_in_process_on_processes_and_on_dask[block_weights_uncapped-efficiency]": 5,
    "scaleout/test_reports_equal.py::test_verifier_reports_are_equal_in_process_on_processes_and_on_dask": 11,
    "scaleout/test_split_scenarios.py::test_split_reports_are_equal_in_process_on_processes_and_on_dask": 5,
    "stats/test_identity.py::TestIdentityTestPower::test_power_at_samples_for[zipf1000]": 6,
    "stats/test_identity.py::TestIdentityTestSize::test_fixed_n_false_alarm_rate[heavy_tiny_n2000]": 6,
    "stats/test_identity.py::TestIdentityTestSize::test_fixed_n_false_alarm_rate_uniform_10k": 17,
    "stats/test_identity.py::TestIdentityTestSize::test_poisson_mean_false_alarm_rate[probs2-1500.0]": 6,
    "stats/test_sequential.py::TestSequentialIdentityTest::test_stops_five_times_earlier_than_fixed_n": 6,
    "torch/test_torch_backend.py::test_torch_generate_passes_the_checker[float32]": 5,
    "torch/test_torch_backend.py::test_torch_generate_passes_the_checker[float16]": 5,  # bfloat16 stays fast
    # [bfloat16] stays fast: the one low-precision run of the impossible-event tolerance (the fault check's
    # "tolerance widens the wrong way" fails it and no other fast test)
    "torch/test_torch_backend.py::test_torch_verify_passes_the_checker[float64]": 9,
    "torch/test_torch_backend.py::test_torch_verify_passes_the_checker[float32]": 9,
    "torch/test_torch_backend.py::test_torch_verify_passes_the_checker[float16]": 9,
    "trees/test_tree_checker.py::test_each_reference_passes_its_battery_in_quick_mode[without_replacement]": 7,
    "trees/test_tree_checker.py::test_each_reference_passes_its_battery_in_quick_mode[topk]": 7,
    "trees/test_tree_checker.py::test_rows_sharing_coins_are_caught": 8,
    "trees/test_tree_cli.py::test_mutants_trees": 7,
    "trees/test_tree_cli.py::test_the_plugin_option_selects_the_tree_verifier": 26,
    "trees/test_tree_policy.py::test_a_multinomial_final_token_passes_in_default_mode_with_the_zero_coin_rate": 6,
    "trees/test_tree_rule_any.py::test_each_reference_passes_under_any[without_replacement]": 5,
    "trees/test_tree_strategies.py::test_trees_shrink_to_the_smallest_star": 13,
    "trees/test_tree_suite_api.py::test_users_tree_verifiers_get_the_tree_properties": 12,
}


#: More collected items than any part of tests/ holds: the whole tree was collected.
WHOLE_TREE_ITEMS = 1000


def _listed(nodeid: str):
    name = nodeid.removeprefix("tests/")
    if name in SLOW:
        return name
    base = name.split("[", 1)[0]
    return base if base in SLOW else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    slow = pytest.mark.slow
    used = set()
    for item in items:
        name = _listed(item.nodeid)
        if name is not None:
            item.add_marker(slow)
            used.add(name)
    stale = sorted(set(SLOW) - used)
    # Only a collection of the whole tree can tell a stale name from one outside the selection: tests/ holds
    # about 1,500 tests; a run of some files or a -k selection collects fewer.
    if stale and len(items) > WHOLE_TREE_ITEMS and not config.getoption("keyword"):
        raise pytest.UsageError(f"tests/conftest.py SLOW lists tests that were not collected: {stale}; "
                                "remove or rename them.")
