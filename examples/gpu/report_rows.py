"""Print a report's slowest-steps table as text: whether kernel sum, GPU busy and host API were
observed, and each listed step's four measures and findings (the device runs check the demo's
report with it: examples/gpu/h200_round5.sh's demo phase).

    python examples/gpu/report_rows.py results/demo/report.html [ROWS]
"""
import html
import re
import sys


def main(path: str, rows: int = 12) -> int:
    s = open(path, encoding="utf-8").read()
    i = s.find("<h3>Slowest steps</h3>")
    if i < 0:
        print(f"{path}: no 'Slowest steps' section")
        return 1
    sec = s[i:s.find("</table>", i)]
    missing = re.search(r"<p>kernel sum, GPU busy, host API: (.*?)</p>", sec)
    print("kernel sum / GPU busy / host API:", "observed (no 'not observed' line)" if not missing
          else re.sub(r"<[^>]+>", "", html.unescape(missing.group(1))))
    trs = re.findall(r"<tr[^>]*>(.*?)</tr>", sec, re.S)
    for tr in trs[: rows + 1]:
        cells = [re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", c))).strip()
                 for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", tr, re.S)]
        print(" | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], *(int(a) for a in sys.argv[2:3])))
