"""The machine a figure was taken on, for the benchmarks' headers."""

import os


def cpu_name(cpus=False):
    """The first CPU's model name, family and model (a virtual machine's
    name alone can be as short as "AMD EPYC"); with cpus, the count of
    CPUs too."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                k, _, v = line.partition(":")
                info[k.strip()] = v.strip()
    except OSError:
        pass
    count = f", {os.cpu_count()} CPUs" if cpus else ""
    return f"{info.get('model name', 'unknown CPU')} (family " \
        f"{info.get('cpu family', '?')} model {info.get('model', '?')}{count})"
