"""Markdown table of bench/train_accuracy.sh results: accuracy (or perplexity) against target."""
import json
import sys

print("| case | ranks | steps | test accuracy | test loss | perplexity | target | met | wall s |")
print("| ---- | ----- | ----- | ------------- | --------- | ---------- | ------ | --- | ------ |")
for line in open(sys.argv[1]):
    d = json.loads(line)
    target = d["target"]
    if target == "perplexity":
        met, target_text = "reported", "report"
    else:
        met = "yes" if d["test_accuracy"] >= float(target) else "**no**"
        target_text = f">= {100 * float(target):.1f}%"
    ppl = f"{d['test_perplexity']:.3f}" if "test_perplexity" in d else ""
    print(f"| {d['case']} | {d['np']} | {d['global_step']} | {100 * d['test_accuracy']:.2f}% | "
          f"{d['test_loss']:.4f} | {ppl} | {target_text} | {met} | {d['wall_s']:.0f} |")
