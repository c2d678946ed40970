"""Broken and hostile xacros: one line naming the file at fault, its line where it can be found, and the
problem; nothing written, nothing already built lost. What a xacro expression may do is restricted."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from usdforge.pipeline import UrdfConverter
from usdforge.pipeline.cli import main
from usdforge.rules.errors import ConversionError
from usdforge.rules.urdf.xacro import expand_xacro
from usdforge.rules.urdf.xacro_process import Refused, check_expression
from usdforge.schemas import UrdfConverterCfg
from xacro_package import write_bot

HEAD = '<?xml version="1.0"?>\n<robot name="r" xmlns:xacro="http://www.ros.org/wiki/xacro">\n'
INERTIA = '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/>'

#: name → (files {relative path: text}, xacro args, file at fault, line, words the message must hold)
CASES = {
    "undefined_property": ({"top.urdf.xacro": HEAD + '  <link name="base">\n    <inertial>'
                            f'<mass value="${{base_mass * 2}}"/>{INERTIA}</inertial>\n  </link>\n</robot>\n'}, {},
                           "top.urdf.xacro", 4, ["undefined property", "'base_mass'"]),
    "undefined_macro": ({"top.urdf.xacro": HEAD + '  <link name="base"/>\n\n  <xacro:wheel side="left"/>\n'
                         '</robot>\n'}, {}, "top.urdf.xacro", 5, ["undefined macro", "xacro:wheel"]),
    "missing_include": ({"top.urdf.xacro": HEAD + '  <xacro:include filename="parts/arm.xacro"/>\n'
                         '  <link name="base"/>\n</robot>\n'}, {},
                        "top.urdf.xacro", 3, ["missing file", "parts/arm.xacro"]),
    "missing_argument": ({"top.urdf.xacro": HEAD + '  <link name="$(arg prefix)base"/>\n</robot>\n'}, {},
                         "top.urdf.xacro", 3, ["undefined xacro argument 'prefix'", "--xacro-arg prefix="]),
    "refused_expression": ({"top.urdf.xacro": HEAD + '  <link name="base"/>\n  <xacro:property name="x" '
                            'value="${().__class__.__base__.__subclasses__()}"/>\n  <link name="b${x}"/>\n</robot>\n'},
                           {}, "top.urdf.xacro", 4, ["refused", "__subclasses__"]),
    "refused_eval": ({"top.urdf.xacro": HEAD + '  <link name="$(eval open)"/>\n</robot>\n'}, {},
                     "top.urdf.xacro", 3, ["refused", "name 'open'"]),
    "file_outside_roots": ({"top.urdf.xacro": HEAD + '  <xacro:property name="y" '
                            'value="${xacro.load_yaml(\'/etc/hostname\')}"/>\n  <link name="b${y}"/>\n</robot>\n'}, {},
                           "top.urdf.xacro", 3, ["refused", "/etc/hostname", "outside"]),
    "environment": ({"top.urdf.xacro": HEAD.replace('name="r"', 'name="$(env HOME)"')
                     + '  <link name="b"/>\n</robot>\n'}, {},
                    "top.urdf.xacro", 2, ["refused", "$(env HOME)", "xacro argument"]),
    "error_in_included_macro": ({"top.urdf.xacro": HEAD + '  <xacro:include filename="inc.xacro"/>\n'
                                 '  <xacro:leg name="a"/>\n</robot>\n',
                                 "inc.xacro": HEAD + '  <xacro:macro name="leg" params="name">\n'
                                 '    <link name="${name}">\n'
                                 '      <visual><geometry><box size="${leg_len} 1 1"/></geometry></visual>\n'
                                 '    </link>\n  </xacro:macro>\n</robot>\n'}, {},
                                "inc.xacro", 5, ["undefined property", "'leg_len'"]),
    "malformed_included_xml": ({"top.urdf.xacro": HEAD + '  <xacro:include filename="inc.xacro"/>\n</robot>\n',
                                "inc.xacro": HEAD + '  <link name="b">\n</robot>\n'}, {},
                               "inc.xacro", 4, ["not well-formed XML"]),
    "malformed_yaml": ({"top.urdf.xacro": HEAD + '  <xacro:property name="d" value="${xacro.load_yaml(\'d.yaml\')}"/>\n'
                        '  <link name="b${d[\'a\']}"/>\n</robot>\n', "d.yaml": "a: 1\nb: [1, 2\n"}, {},
                       "d.yaml", 3, ["not valid YAML"]),
    "macro_call_missing_parameter": ({"top.urdf.xacro": HEAD + '  <xacro:macro name="m" params="a b">\n'
                                      '    <link name="${a}${b}"/>\n  </xacro:macro>\n  <xacro:m a="x"/>\n</robot>\n'},
                                     {}, "top.urdf.xacro", 6, ["Undefined parameters [b]", "macro 'm'"]),
    "non_boolean_condition": ({"top.urdf.xacro": HEAD + '  <xacro:if value="maybe">\n    <link name="b"/>\n'
                               '  </xacro:if>\n</robot>\n'}, {}, "top.urdf.xacro", 3, ["not a boolean"]),
    "include_outside_roots": ({"top.urdf.xacro": HEAD + '  <xacro:include filename="../secret/key.xacro"/>\n'
                               '  <link name="b"/>\n</robot>\n', "../secret/key.xacro": HEAD + "</robot>\n"}, {},
                              "top.urdf.xacro", 3, ["refused", "outside"]),
    "glob_include_outside_roots": ({"top.urdf.xacro": HEAD + '  <xacro:include filename="../secret/*.xacro"/>\n'
                                    '  <link name="b"/>\n</robot>\n', "../secret/key.xacro": HEAD + "</robot>\n"},
                                   {}, "top.urdf.xacro", 3, ["refused", "the include pattern", "outside"]),
    "unbounded_memory": ({"top.urdf.xacro": HEAD + '  <link name="${\'x\' * 10**11}"/>\n</robot>\n'}, {},
                         "top.urdf.xacro", 3, ["out of memory"]),
}


def write_case(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root / "top.urdf.xacro"


@pytest.mark.parametrize("name", list(CASES))
def test_broken_xacro_is_one_line_naming_file_line_and_problem_and_writes_nothing(name, tmp_path):
    files, args, at_fault, line, words = CASES[name]
    source = write_case(tmp_path / "src", files)
    out = tmp_path / "out"
    with pytest.raises(ConversionError) as caught:
        UrdfConverter(UrdfConverterCfg(asset_path=str(source), usd_dir=str(out), xacro_args=args))
    message = str(caught.value)
    assert "\n" not in message
    where = str(tmp_path / "src" / at_fault) + (f":{line}" if line else "")
    assert message.startswith(where + ": xacro: "), message
    for word in words:
        assert word in message, message
    assert not out.exists()


def test_command_line_error_is_one_line_and_writes_nothing(tmp_path, capsys):
    files, args, at_fault, line, words = CASES["undefined_macro"]
    source = write_case(tmp_path / "src", files)
    assert main(["convert", str(source), str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"usdforge: error: {source}:5: xacro: undefined macro")
    assert not (tmp_path / "out").exists()


def test_a_broken_edit_keeps_the_output_already_built(tmp_path):
    package = write_bot(tmp_path / "src")
    out = tmp_path / "out"
    cfg = UrdfConverterCfg(asset_path=str(package / "urdf" / "bot.urdf.xacro"), usd_dir=str(out),
                           ros_package_paths=[{"name": "bot_description", "path": str(package)}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = UrdfConverter(cfg)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    arm = package / "urdf" / "arm.xacro"
    arm.write_text(arm.read_text().replace("${length / 2}", "${lenght / 2}"))
    with pytest.raises(ConversionError, match=rf"^{arm}:\d+: xacro: undefined property or name 'lenght'"):
        UrdfConverter(cfg)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert Path(first.usd_path).is_file()


def test_a_missing_include_is_watched_so_creating_it_reconverts(tmp_path):
    package = write_bot(tmp_path / "src")
    top = package / "urdf" / "bot.urdf.xacro"
    top.write_text(top.read_text().replace("</robot>", '  <xacro:include filename="extra.xacro" optional="true"/>\n'
                                                       "</robot>"))
    cfg = UrdfConverterCfg(asset_path=str(top), usd_dir=str(tmp_path / "out"),
                           ros_package_paths=[{"name": "bot_description", "path": str(package)}])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert UrdfConverter(cfg).converted
        assert not UrdfConverter(cfg).converted
        (package / "urdf" / "extra.xacro").write_text(HEAD + '  <link name="extra"/>\n'
                                                      '  <joint name="j" type="fixed"><parent link="arm"/>'
                                                      '<child link="extra"/></joint>\n</robot>\n')
        again = UrdfConverter(cfg)
    assert again.converted and any("extra.xacro" in reason for reason in again.reasons)


def test_optenv_gives_its_default_with_a_warning_and_never_reads_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("USDFORGE_TEST_NAME", "from_environment")
    source = write_case(tmp_path, {"top.urdf.xacro": HEAD.replace('name="r"', 'name="$(optenv USDFORGE_TEST_NAME bot)"')
                                   + '  <link name="b"/>\n</robot>\n'})
    expansion = expand_xacro(source)
    assert b'<robot name="bot">' in expansion.urdf
    assert any("optenv USDFORGE_TEST_NAME" in w for w in expansion.warnings)


def test_find_pkg_share_resolves_through_the_packages(tmp_path):
    package = write_bot(tmp_path / "src")
    top = package / "urdf" / "bot.urdf.xacro"
    top.write_text(top.read_text().replace("$(find bot_description)", "$(find-pkg-share bot_description)"))
    moved = tmp_path / "elsewhere"
    shutil.move(package, moved)
    expansion = expand_xacro(moved / "urdf" / "bot.urdf.xacro", {"bot_description": str(moved)})
    assert str(moved / "config" / "short.yaml") in expansion.files
    assert b'<link name="arm">' in expansion.urdf


@pytest.mark.parametrize("expression", [
    "a * 2 + b", "dims['arm_length'] / 2", "[x * 2 for x in range(3)]", "math.pi if flag else -1",
    "{'k': 1}.get('k')", "' '.join(str(v) for v in (1, 2))", "f'{a:.3f}'", "xacro.load_yaml(config).arm_length",
])
def test_plain_expressions_are_allowed(expression):
    check_expression(expression)


@pytest.mark.parametrize("expression", [
    "__import__('os')", "x.__class__", "().__class__.__bases__[0].__subclasses__()", "'{0.__class__}'.format(x)",
    "'{x}'.format_map(d)", "lambda: 1", "(y := 1)", "_private", "x._hidden",
    "[g.gi_frame.f_back.f_globals for g in [(x for x in [1])]][0]['os']",
])
def test_expressions_reaching_python_internals_are_refused(expression):
    with pytest.raises(Refused):
        check_expression(expression)


def test_errors_in_the_expanded_urdf_name_the_xacro_and_the_element_without_a_line(tmp_path):
    source = write_case(tmp_path, {"top.urdf.xacro": HEAD + '  <xacro:property name="child" value="missing"/>\n'
                                   '  <link name="a"/>\n  <joint name="j" type="fixed"><parent link="a"/>'
                                   '<child link="${child}"/></joint>\n</robot>\n'})
    with pytest.raises(ConversionError) as caught:
        UrdfConverter(UrdfConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out")))
    # The expansion's lines are not the file's: the message names the element only.
    assert str(caught.value).startswith(f"{source}: <child>: child link 'missing'"), str(caught.value)
    assert not (tmp_path / "out").exists()


def test_links_are_followed_then_checked(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text("a: 1\n")
    robot = tmp_path / "robot"
    source = write_case(robot, {"top.urdf.xacro": HEAD + '  <xacro:property name="d" '
                                'value="${xacro.load_yaml(\'config.yaml\')}"/>\n  <link name="b${d[\'a\']}"/>\n</robot>\n'})
    (robot / "config.yaml").symlink_to(outside / "secret.yaml")
    with pytest.raises(ConversionError, match=r"refused: .*config\.yaml is outside the xacro's folder"):
        expand_xacro(source)
    # A linked source is read from its real folder; what it names is relative to the link, as in xacro.
    (robot / "config.yaml").unlink()
    (robot / "config.yaml").write_text("a: 7\n")
    (outside / "top.urdf.xacro").write_text(source.read_text())
    source.unlink()
    source.symlink_to(outside / "top.urdf.xacro")
    assert b'<link name="b7"/>' in expand_xacro(source).urdf


def test_an_include_glob_names_no_file_outside_the_roots(tmp_path):
    """xacro globs an include pattern itself: the error names the pattern as written, never what it matched
    outside the xacro's folder (a directory listing of another folder)."""
    files, args, _, _, _ = CASES["glob_include_outside_roots"]
    source = write_case(tmp_path / "src", files)
    with pytest.raises(ConversionError) as caught:
        UrdfConverter(UrdfConverterCfg(asset_path=str(source), usd_dir=str(tmp_path / "out")))
    assert "key.xacro" not in str(caught.value) and "secret/*.xacro" in str(caught.value)


def test_eval_reaches_no_real_builtin_through_a_comprehension(tmp_path):
    """A comprehension's scope reads free names from the globals, where Python puts the real builtins:
    with xacro arguments named like builtins, ``$(eval [open for f in [1]])`` gave the real ``open``."""
    source = write_case(tmp_path / "src", {"top.urdf.xacro": HEAD + '  <xacro:arg name="open" default="1"/>\n'
                                           '  <xacro:arg name="f" default="2"/>\n'
                                           '  <xacro:arg name="globals" default="3"/>\n'
                                           '  <link name="a$(eval [open for f in [1]])"/>\n'
                                           '  <link name="b$(eval [globals for f in [1]])"/>\n</robot>\n'})
    urdf = expand_xacro(source).urdf.decode()
    assert "built-in" not in urdf and 'name="a[1]"' in urdf and 'name="b[3]"' in urdf, urdf


def test_an_expansion_larger_than_the_limit_is_refused_in_the_child(tmp_path, monkeypatch):
    from usdforge.rules.urdf import xacro

    monkeypatch.setattr(xacro, "MAX_EXPANDED_BYTES", 4 << 20)
    source = write_case(tmp_path / "src", {"top.urdf.xacro": HEAD + '  <link name="${\'b\' * 8000000}"/>\n</robot>\n'})
    with pytest.raises(ConversionError) as caught:
        expand_xacro(source)
    assert str(caught.value).startswith(f"{source}: xacro: the expanded URDF is larger than 4 MiB"), caught.value


def test_the_parent_reads_at_most_the_limit_of_a_childs_reply():
    """A child that sends more than the limit (not the expansion process: it checks its own size) is
    stopped once the parent has read the limit, so the parent never holds more."""
    import sys

    from usdforge.rules.urdf.xacro import _run_bounded

    writer = "import sys\nfor _ in range(256): sys.stdout.buffer.write(b'x' * (1 << 20))\n"
    stdout, _, status = _run_bounded([sys.executable, "-c", writer], b"", 60, 1 << 20)
    assert stdout is None and status is not None and status != 0
    stdout, _, status = _run_bounded([sys.executable, "-c", "print('ok')"], b"", 60, 1 << 20)
    assert stdout == (b"ok", b"") and status == 0
