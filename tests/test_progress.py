"""Training progress: plain lines at a fixed cadence without a terminal, a tqdm bar on one."""
import io
import logging
import logging.config

import pytest
from omegaconf import OmegaConf

from gsexp.train.progress import Progress, format_duration

LINE_LOGGER = "gsexp.train"


class Clock:
    def __init__(self, t=100.0):
        self.t = t

    def __call__(self):
        return self.t


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def run_steps(progress, clock, start, stop, seconds_per_step, log_every=None, values=None):
    for step in range(start, stop):
        clock.t += seconds_per_step
        kw = values(step) if log_every and step % log_every == 0 else {}
        progress.update(step + 1, **kw)


def test_plain_lines_at_the_cadence_with_their_fields(caplog):
    caplog.set_level(logging.INFO, logger=LINE_LOGGER)
    clock, out = Clock(), io.StringIO()
    progress = Progress(100, start=0, every_seconds=5.0, stream=out, clock=clock)
    # 0.5 s a step: the first step, then every 10 steps (5 s), then the last one
    run_steps(progress, clock, 0, 100, 0.5, log_every=10,
              values=lambda s: {"loss": 0.5 / (s + 1), "psnr": 10 + s / 10, "num_gaussians": 1000 + 100 * s})
    progress.close()
    lines = out.getvalue().splitlines()
    steps = [int(line.split()[1].split("/")[0]) for line in lines]
    assert steps == [1, 11, 21, 31, 41, 51, 61, 71, 81, 91, 100]
    assert lines[0] == "step 1/100 (1.0%) | 2.0 it/s | ETA 00:50 | loss 0.5000 | train PSNR 10.00 | 1,000 Gaussians"
    # step 11's line: the values from step 10's log (update(11, ...)), 10 steps in 5 s
    assert lines[1] == "step 11/100 (11.0%) | 2.0 it/s | ETA 00:45 | loss 0.0455 | train PSNR 11.00 | 2,000 Gaussians"
    # the last line: no new values since step 91's line (logged at step 90): the last known ones
    assert lines[-1] == "step 100/100 (100.0%) | 2.0 it/s | ETA 00:00 | loss 0.0055 | train PSNR 19.00 | " \
                        "10,000 Gaussians"
    assert [r.getMessage() for r in caplog.records if r.name == LINE_LOGGER] == lines  # train.log gets the same
    assert all(r.levelno == logging.INFO for r in caplog.records)


def test_rate_is_over_the_steps_since_the_last_line():
    clock, out = Clock(), io.StringIO()
    progress = Progress(1000, every_seconds=5.0, stream=out, clock=clock)
    run_steps(progress, clock, 0, 20, 0.5)  # 2 it/s: lines at steps 1 (t 0.5) and 11 (t 5.5)
    run_steps(progress, clock, 20, 42, 0.25)  # then 4 it/s: lines at 22 (t 10.5) and 42 (t 15.5)
    lines = out.getvalue().splitlines()
    assert [line.split(" | ")[0].split()[1] for line in lines] == ["1/1000", "11/1000", "22/1000", "42/1000"]
    # 11 -> 22: 9 steps at 0.5 s and 2 at 0.25 s; 22 -> 42: 20 steps at 0.25 s
    assert [line.split(" | ")[1] for line in lines] == ["2.0 it/s", "2.0 it/s", "2.2 it/s", "4.0 it/s"]
    # The ETA's rate fades older lines over a 120 s window (the first line's interval left out):
    # steps 10, 11, 20 over 5 s each, weights e^(-10/120), e^(-5/120), 1 -> 39.75 / 14.40 s = 2.76 it/s
    assert lines[-1] == "step 42/1000 (4.2%) | 4.0 it/s | ETA 05:47"  # 958 steps at 2.76 it/s
    clock.t += 60
    progress.update(52)  # 10 steps in a minute: seconds per step; the ETA rate 34.11 / 68.73 s
    assert out.getvalue().splitlines()[-1] == "step 52/1000 (5.2%) | 6.00 s/it | ETA 31:50"


def test_no_values_yet_and_a_resumed_run():
    clock, out = Clock(), io.StringIO()
    progress = Progress(50, start=30, every_seconds=1.0, stream=out, clock=clock)
    clock.t += 4
    progress.update(32)  # resumed at 30: two steps in 4 s
    assert out.getvalue() == "step 32/50 (64.0%) | 2.00 s/it | ETA 00:36\n"
    progress.update(33)  # same instant: under the cadence, no line
    progress.close()  # a loop left early: its last step gets a line
    assert out.getvalue().splitlines()[-1] == "step 33/50 (66.0%) | ? it/s | ETA ?"
    progress.close()  # nothing new: nothing more
    assert len(out.getvalue().splitlines()) == 2


def test_on_a_terminal_a_tqdm_bar_and_no_plain_lines(caplog):
    caplog.set_level(logging.INFO, logger=LINE_LOGGER)
    clock, out = Clock(), FakeTTY()
    progress = Progress(40, start=0, every_seconds=0.0, stream=out, clock=clock)
    assert progress.bar is not None
    run_steps(progress, clock, 0, 40, 1.0, log_every=10,
              values=lambda s: {"loss": 0.25, "psnr": 21.5, "num_gaussians": 1234})
    assert progress.bar.n == 40 and progress.bar.postfix == "loss=0.2500, psnr=21.50, G=1234"
    progress.close()
    text = out.getvalue()
    assert "40/40" in text and "\r" in text  # tqdm's bar, redrawn in place
    assert "it/s |" not in text and "train PSNR" not in text
    assert not [r for r in caplog.records if r.name == LINE_LOGGER]


def test_not_written_twice_when_the_logger_already_prints_to_the_stream():
    """Under Hydra the root logger's console handler writes to stdout: the line goes there once."""
    out = io.StringIO()
    log = logging.getLogger("gsexp.test_progress.console")
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("[%(name)s][%(levelname)s] - %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        clock = Clock()
        progress = Progress(10, every_seconds=5.0, stream=out, log=log, clock=clock)
        clock.t += 1
        progress.update(1, loss=0.1)
        assert out.getvalue() == "[gsexp.test_progress.console][INFO] - step 1/10 (10.0%) | 1.0 it/s | ETA 00:09 | " \
                                 "loss 0.1000\n"
    finally:
        log.removeHandler(handler)


def test_under_hydra_job_logging_train_log_and_stdout_get_each_line_once(tmp_path, capsys):
    """The repo's Hydra job logging (root: a console handler on sys.stdout and <run dir>/train.log):
    train.log holds every line, stdout each line once; Progress's stream is sys.stdout, as in train()."""
    from test_train_config import compose_train

    conf = OmegaConf.to_container(compose_train([], hydra=True).hydra.job_logging, resolve=False)
    conf["handlers"]["file"]["filename"] = str(tmp_path / "train.log")
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        logging.config.dictConfig(conf)
        clock = Clock()
        progress = Progress(20, every_seconds=5.0, clock=clock)
        run_steps(progress, clock, 0, 20, 1.0, log_every=10,
                  values=lambda s: {"loss": 0.1, "psnr": 20.0, "num_gaussians": 1000})
        progress.close()
    finally:
        for handler in root.handlers:
            if handler not in saved[0]:
                handler.close()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    expected = [f"step {s}/20 ({5 * s:.1f}%) | 1.0 it/s | ETA 00:{20 - s:02d} | loss 0.1000 | train PSNR 20.00 | "
                "1,000 Gaussians" for s in (1, 6, 11, 16, 20)]
    for text in (capsys.readouterr().out, (tmp_path / "train.log").read_text()):
        lines = text.splitlines()
        assert [line.split("[INFO] - ", 1)[1] for line in lines] == expected
        assert all(line.startswith("[") and "][gsexp.train][INFO] - step " in line for line in lines)


@pytest.mark.parametrize("seconds,text", [(0, "00:00"), (44.5, "00:45"), (59.6, "01:00"), (754, "12:34"), (3723, "1:02:03")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text
