"""Each option is declared once (``tfrecorder_lite/option_declarations.py``), and every door, the
options objects and the CLI take it as declared: the same spelling, default and allowed values;
a bad value of a table option is refused alike by every door that reads a table."""

import dataclasses
import inspect

import pandas as pd
import pytest

import tfrecorder_lite
from conftest import photo, save
from tfrecorder_lite import SchemaError, cli, option_declarations, options
from tfrecorder_lite.option_declarations import BY_NAME, OPTIONS, OWNERS
from tfrecorder_lite import table_dataset as direct
from tfrecorder_lite.sources import automl_csv, registry

DOORS = {"to_tfrecord": tfrecorder_lite.to_tfrecord, "dataset": direct.dataset,
         "validate": tfrecorder_lite.validate, "load": tfrecorder_lite.load,
         "data_source": tfrecorder_lite.data_source}


def _keywords(call):
    return {name: p.default for name, p in inspect.signature(call).parameters.items()
            if p.kind is p.KEYWORD_ONLY}


@pytest.mark.parametrize("door", DOORS)
def test_each_door_takes_its_declared_options_with_their_defaults(door):
    taken = _keywords(DOORS[door])
    assert sorted(taken) == sorted(option_declarations.names(door))
    for name, default in taken.items():
        assert default == BY_NAME[name].default_at(door), (door, name)


def test_convert_takes_to_tfrecords_options_and_its_sources_options():
    assert set(option_declarations.names("to_tfrecord")) <= set(
        option_declarations.names("convert"))
    reading = _keywords(registry.read_source)
    for name in option_declarations.source_option_names():
        assert reading[name] == BY_NAME[name].default_at("convert"), name
    assert BY_NAME["task"].allowed_by("convert") == (*automl_csv.TASKS, None)


def test_the_options_objects_hold_the_declared_options_by_keyword_only():
    classes = {"TableOptions": options.TableOptions, "WriteOptions": options.WriteOptions,
               "LoadOptions": options.LoadOptions}
    assert set(classes) == set(OWNERS)
    for owner, cls in classes.items():
        fields = {f.name: f.default for f in dataclasses.fields(cls) if f.init}
        assert sorted(fields) == sorted(option_declarations.owned_by(owner))
        for name, default in fields.items():
            assert default == BY_NAME[name].default_at(OWNERS[owner]), (owner, name)
            assert BY_NAME[name].doors.count(OWNERS[owner]) == 1
        with pytest.raises(TypeError):
            cls(*fields.values())  # a reordered field cannot swap values silently


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("declared")
    for i in range(4):
        save(photo(16, 16, seed=i), root / f"{i}.jpg", "JPEG")
    return pd.DataFrame({"split": ["TRAIN", "TRAIN", "TEST", "TEST"],
                         "image_uri": [str(root / f"{i}.jpg") for i in range(4)],
                         "label": ["cat", "dog", "cat", "dog"]})


@pytest.fixture(scope="module")
def written(table, tmp_path_factory):
    out = tmp_path_factory.mktemp("declared-out") / "out"
    tfrecorder_lite.to_tfrecord(table, out, progress=False)
    return out


def _call(door, table, written, where, **options):
    if door in ("to_tfrecord", "convert"):
        call = tfrecorder_lite.convert if door == "convert" else tfrecorder_lite.to_tfrecord
        return call(table, where / "out", progress=False, **options)
    if door == "dataset":
        return direct.dataset(table, "TRAIN", **options)
    if door == "validate":
        return tfrecorder_lite.validate(table, **options)
    return DOORS[door](written, "TRAIN", **options)


CHOICES = [(door, option.name) for option in OPTIONS for door in option.doors
           if option.allowed_by(door) is not None]


@pytest.mark.parametrize("door, name", CHOICES, ids=[f"{d}-{n}" for d, n in CHOICES])
def test_each_door_refuses_a_value_the_declaration_does_not_allow(door, name, table, written,
                                                                  tmp_path):
    with pytest.raises(SchemaError) as refused:
        _call(door, table, written, tmp_path, **{name: "not-a-choice"})
    message = str(refused.value)
    assert message.startswith(f"{name} must be") and "'not-a-choice'" in message
    for value in BY_NAME[name].allowed_by(door):  # the message names each allowed value
        assert repr(value) in message, (door, name, value, message)
    assert not (tmp_path / "out").exists()


# every table option, a bad value: each door that reads a table refuses it with one message
BAD_TABLE_OPTIONS = {
    "split_col": "nope", "image_col": "nope", "label_col": "nope",
    "label_map": {"cat": -1}, "label_sep": 5, "features": {"label": "complex64"},
    "unassigned": "keep", "split_ratios": [1, 2, 3], "box_units": "cm",
    "box_columns": "is_crowd", "base_dir": 5, "mask_col": 5, "mask_colors": "red",
    "mask_labels": 5, "ignore_value": 300, "allow_lossy_masks": "yes",
}


@pytest.mark.parametrize("name", sorted(BAD_TABLE_OPTIONS))
def test_a_bad_table_option_is_refused_alike_by_every_door(name, table, tmp_path):
    assert sorted(BAD_TABLE_OPTIONS) == sorted(option_declarations.owned_by("TableOptions"))
    bad = {name: BAD_TABLE_OPTIONS[name]}
    messages = {}
    for door in ("validate", "dataset", "to_tfrecord"):
        with pytest.raises(SchemaError) as refused:
            _call(door, table, None, tmp_path, **bad)
        messages[door] = str(refused.value)
    assert len(set(messages.values())) == 1, messages
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------------- the CLI

def test_the_cli_flags_are_the_declared_options():
    parser = cli._parser()
    commands = next(a for a in parser._actions if isinstance(a.choices, dict))
    convert = commands.choices["convert"]
    flags = {flag: action for action in convert._actions for flag in action.option_strings
             if flag.startswith("--") and flag != "--help"}
    declared = {option.flag: option for option in option_declarations.at("convert")
                if option.flag is not None}
    assert sorted(flags) == sorted(declared)
    for flag, option in declared.items():
        action = flags[flag]
        if flag.startswith("--no-"):  # a flag that turns an option off
            assert option.default_at("convert") is True and action.default is False, flag
            continue
        assert action.help == option.help, flag
        if action.nargs == 0:  # a flag that turns an option on
            assert option.default_at("convert") is False and action.const is True, flag
            continue
        assert action.default == option.default_at("convert"), flag
        allowed = option.allowed_by("convert")
        assert (action.choices is None) == (allowed is None), flag
        if allowed is not None:
            assert set(action.choices) == set(allowed) - {None}, flag


def test_the_cli_gives_convert_the_declared_defaults():
    args = cli._parser().parse_args(["convert", "table.csv", "out"])
    given = cli._convert_options(args)
    assert given == {option.name: option.default_at("convert")
                     for option in option_declarations.at("convert") if option.flag}
