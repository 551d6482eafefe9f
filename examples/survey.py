"""Every backend ironaccel knows of: installed or not, usable or not (and why), and its devices.

    python examples/survey.py

Runs on any machine: a backend that is missing or unusable is listed with the reason and the fix.
"""

import ironaccel


def main() -> None:
    reports = ironaccel.survey()
    for report in reports:
        probe = report.probe
        state = "available" if probe.available else f"unavailable: {probe.reason}"
        print(f"{report.name:<10} {state}")
        if not probe.available and probe.fix:
            print(f"{'':<10} fix: {probe.fix}")
        for dev in report.devices:
            print(f"{'':<10} [{dev.ordinal}] {dev.name} ({dev.kind.value}, {dev.memory_bytes / 2**30:.1f} GiB)")
    assert reports, "the survey lists every first-party backend, installed or not"
    usable = sum(r.probe.available for r in reports)
    print(f"{usable} of {len(reports)} backends usable here")


if __name__ == "__main__":
    main()
