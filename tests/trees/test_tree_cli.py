"""The tree subcommand, ``mutants --trees`` and the pytest plugin's tree option."""

import subprocess
import sys

import pytest

from specdec_check._cli import main

COMMON = ["--mode", "quick", "--no-progress", "--no-report", "-q", "--scenario", "star-3-enumerable"]


def test_tree_reference_passes_and_a_bug_fails(capsys):
    assert main(["tree", *COMMON]) == 0
    assert "numpy_verify_tree_topk: PASSED" in capsys.readouterr().out
    assert main(["tree", "specdec_check.bugs:tree_iid_rule_on_topk_drafts", "--drafting", "topk", *COMMON]) == 1
    assert main(["tree", "specdec_check.samplers:numpy_verify_tree_iid", *COMMON]) == 0  # .drafting read


def test_tree_usage_errors(capsys):
    assert main(["tree", "--drafting", "beam", *COMMON]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main(["tree", "--mode", "quick", "--no-report", "--scenario", "no-such-tree"]) == 2
    assert "unknown scenario" in capsys.readouterr().err


def test_tree_report_files(tmp_path):
    assert main(["tree", "--mode", "quick", "--no-progress", "-q", "--scenario", "small-tree-enumerable",
                 "--report", str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.iterdir()} >= {"report.json", "report.md", "report.html"}
    assert main(["report", str(tmp_path / "report.json"), "--format", "md", "--stdout"]) == 0


def test_mutants_trees(capsys):
    pytest.importorskip("torch")
    assert main(["mutants", "--trees", "--mode", "quick", "--no-progress", "tree_final_from_root_row",
                 "control_tree_topk"]) == 0
    out = capsys.readouterr().out
    assert "1/1 bugs detected, 1/1 controls passed" in out
    assert main(["mutants", "--trees", "--no-progress", "resample_from_target"]) == 2  # a chain entry


def test_the_plugin_option_selects_the_tree_verifier(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs", "specdec_check.suite",
         "-k", "tree_contract", "--specdec-tree-verifier", "specdec_check.bugs:tree_final_from_root_row"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 1, run.stdout[-2000:]
    assert "tree_final_from_root_row fails the tree 'contract' property" in run.stdout
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs", "specdec_check.suite",
         "-k", "tree_contract", "--specdec-tree-verifier", "no_such_module:verify"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode != 0 and "no_such_module" in run.stdout + run.stderr
