"""train.py's command-line overrides, composed once before Hydra runs them. Hydra's own errors
for a misspelled key or option are 7-13 lines, exit 1, and advise `+key=value`, which the schema
then refuses; here each is one line (a ConfigError) naming the key or option and the close
matches, as gsexp/config.py's own errors do."""
from __future__ import annotations

import argparse
import difflib

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError

from gsexp.errors import ConfigError
from gsexp.paths import REPO_ROOT

CONF = REPO_ROOT / "conf"
# Keys that take a path. Run folders are named after overrides (outputs/runs/device=cpu), and
# Hydra's grammar refuses an unquoted '=' in a value, so these values are quoted for the user.
PATH_KEYS = ("data.path", "model.ply", "resume", "paths.root")


def quote_paths(overrides: list[str]) -> list[str]:
    """`model.ply=runs/device=cpu/point_cloud.ply` -> `model.ply='runs/device=cpu/point_cloud.ply'`:
    the whole value is one path, commas included (run folders join overrides with ',')."""
    return [quote_path(o) for o in overrides]


def quote_path(override: str) -> str:
    key, sep, value = override.partition("=")
    if not sep or key.lstrip("+") not in PATH_KEYS or "=" not in value or value[:1] in "'\"":
        return override
    for quote in "'\"":
        if quote not in value and not value.endswith("\\"):
            return f"{key}={quote}{value}{quote}"
    return override  # holds both quotes: left to the parser's error, which says how to quote


def check(argv: list[str], config_name: str = "train") -> None:
    """Compose the overrides in `argv` (train.py's arguments) as Hydra will; ConfigError when that
    fails. In a multirun every value of a swept key is composed, each with the others' first."""
    parsed = hydra_args(argv)
    if parsed is None:
        return  # Hydra's parser refuses argv, or a flag changes the config searched: Hydra reports
    overrides = parse(parsed.overrides)
    for variant in variants(overrides, parsed.multirun):
        compose(variant, config_name)


def hydra_args(argv: list[str]) -> argparse.Namespace | None:
    from hydra._internal.utils import get_args_parser

    class Refused(Exception):
        pass

    def refuse(message):
        raise Refused(message)

    parser = get_args_parser()
    parser.error = refuse  # Hydra prints its own usage error when it parses argv itself
    if "--version" in argv:
        return None
    try:
        args = parser.parse_args(argv)
    except Refused:
        return None
    if args.help or args.hydra_help or args.shell_completion or args.config_path or args.config_name \
            or args.config_dir or args.experimental_rerun:
        return None
    return args


def parse(overrides: list[str]) -> list:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    parsed = []
    for text in overrides:
        try:
            parsed.append(parser.parse_override(text))
        except HydraException as err:
            raise ConfigError(f"override '{text}' cannot be parsed ({first_line(err)}); {quoting_advice(text)}",
                              key=text.partition("=")[0].lstrip("+~")) from None
    return parsed


def quoting_advice(text: str) -> str:
    key, sep, value = text.partition("=")
    if not sep:
        return f"write key=value, e.g. {text}=... (python train.py --help lists the keys)"
    return (f"quote a value that holds '=', ',', spaces or brackets, and the whole argument for the shell: "
            f"'{key}=\"{value}\"'")


def variants(overrides: list, multirun: bool) -> list[list[str]]:
    """The override lists to compose: one, or in a multirun one with each swept key at its first
    value, plus one for each other option of a swept group (another value of a plain key cannot
    fail to compose). Sweeps that cannot be listed (glob, interval) are left to Hydra."""
    if not multirun:
        return [[o.input_line for o in overrides]]
    kept = [(o, sweep_values(o)) for o in overrides]
    kept = [(o, values) for o, values in kept if values is not None or not o.is_sweep_override()]
    first = [o.input_line if values is None else f"{o.get_key_element()}={values[0]}" for o, values in kept]
    out = [first]
    for i, (o, values) in enumerate(kept):
        if values is not None and is_group(o.key_or_group):
            out += [first[:i] + [f"{o.get_key_element()}={v}"] + first[i + 1:] for v in values[1:]]
    return out


def is_group(key: str) -> bool:
    return "." not in key and ((CONF / key).is_dir() or key.startswith("hydra/"))


def sweep_values(override) -> list[str] | None:
    """A swept override's values as override text; None when not swept or not listable."""
    if not override.is_sweep_override():
        return None
    try:
        return list(dict.fromkeys(override.sweep_string_iterator()))
    except Exception:  # noqa: BLE001 - glob needs Hydra's config loader, intervals are continuous
        return None


def compose(overrides: list[str], config_name: str) -> DictConfig:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import ConfigCompositionException, MissingConfigException

    try:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            return hydra_compose(config_name, overrides=overrides, return_hydra_config=True)
    except MissingConfigException as err:
        raise missing_option(err) from None
    except ConfigCompositionException as err:
        if isinstance(err.__cause__, (ConfigAttributeError, ConfigKeyError)):  # a key not in the config
            key = err.__cause__.full_key
            raise unknown_key(key, [o for o in overrides if override_key(o) != key], config_name) from None
        raise ConfigError(first_line(err, all_lines=True)) from None


def missing_option(err) -> ConfigError:
    """`strategy=mcmcc`: conf/strategy/mcmcc.yaml does not exist."""
    group, _, name = (err.missing_cfg_file or "").rpartition("/")
    options = list(err.options or [])
    if not group:  # not a group's option (the primary config itself): Hydra's words, on one line
        return ConfigError(first_line(err, all_lines=True))
    where = f" in conf/{group}/" if (CONF / group).is_dir() else ""
    return ConfigError(f"config group '{group}': no option '{name}'{where}; {suggest(name, options, 'options')}",
                       key=group)


def unknown_key(key: str, others: list[str], config_name: str) -> ConfigError:
    """`itrations=100`: no such key where it would go; names the keys it may have meant."""
    parent_key, _, leaf = key.rpartition(".")
    try:
        cfg = compose(others, config_name)
    except ConfigError:
        cfg = None
    parent = OmegaConf.select(cfg, parent_key) if cfg is not None and parent_key else cfg
    keys = [str(k) for k in parent.keys()] if isinstance(parent, DictConfig) else []
    where = f" in {parent_key}" if parent_key else ""
    return ConfigError(f"config key '{key}': no such key{where}; "
                       f"{suggest(leaf, keys, 'keys', list_all=bool(parent_key))} (gsexp/config.py lists every key)",
                       key=key)


def suggest(name: str, options: list[str], what: str, list_all: bool = True) -> str:
    close = difflib.get_close_matches(name, options, n=3, cutoff=0.6)
    if close:
        return f"did you mean {' or '.join(close)}?"
    if options and list_all:
        return f"the {what} are {', '.join(sorted(options))}"
    return "check the spelling"


def override_key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


def first_line(err: BaseException, all_lines: bool = False) -> str:
    """Hydra's message without its pointer to the grammar docs or the search path."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    kept = [line for line in lines if not line.startswith(("See https://", "Config search path", "provider="))]
    return " ".join(kept) if all_lines else (kept or [type(err).__name__])[0]
