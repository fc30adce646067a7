"""Whether a counterfactual flips the model's answer, read from the two logit differences.

Patching ranks heads by how far each moves logit(answer) − logit(wrong) toward its value on the
counterfactual. That ranking says which heads *decide the answer* only when the two runs disagree on it:
the sentence prefers the answer (a positive difference) and the counterfactual the wrong word (a negative
one). When both runs prefer the same word, the heads found move a preference that never changes hands
(Heimersheim & Nanda 2024, on choosing a counterfactual that changes the behaviour studied), and a report
must say so before it ranks anything.
"""

from __future__ import annotations


def preferred(logit_diff: float) -> str:
    """Which word a logit difference prefers: "answer" (> 0), "wrong" (< 0) or "neither" (exactly 0)."""
    return "answer" if logit_diff > 0 else "wrong" if logit_diff < 0 else "neither"


def answer_flip(clean_logit_diff: float, corrupt_logit_diff: float) -> dict:
    """{"flips", "clean_prefers", "corrupt_prefers", "clean_logit_diff", "corrupt_logit_diff"}: ``flips``
    only when the sentence prefers the answer and the counterfactual the wrong word."""
    clean, corrupt = preferred(clean_logit_diff), preferred(corrupt_logit_diff)
    return {"flips": clean == "answer" and corrupt == "wrong", "clean_prefers": clean, "corrupt_prefers": corrupt,
            "clean_logit_diff": float(clean_logit_diff), "corrupt_logit_diff": float(corrupt_logit_diff)}


def no_flip_message(flip: dict, answer: str, wrong: str) -> str | None:
    """None when the counterfactual flips the answer; else, in words with both logit differences, what did
    not happen and what the patching ranking then means."""
    if flip["flips"]:
        return None
    word = {"answer": answer, "wrong": wrong, "neither": "neither word"}
    clean, corrupt = flip["clean_prefers"], flip["corrupt_prefers"]
    data = (f"logit difference {answer} − {wrong}: {flip['clean_logit_diff']:+.3f} on the sentence, "
            f"{flip['corrupt_logit_diff']:+.3f} on the counterfactual")
    if clean == corrupt:
        what = f"the model prefers {word[clean]} on both"
    elif clean == "wrong":
        what = (f"the model prefers {wrong} on the sentence (it gets the sentence wrong) and "
                f"{word[corrupt]} on the counterfactual")
    else:
        what = f"the model prefers {word[clean]} on the sentence and {word[corrupt]} on the counterfactual"
    return (f"The counterfactual does not flip the answer: {what} ({data}). The heads ranked by patching move "
            "the logit difference, but none of them is shown to decide the answer; choose a counterfactual on "
            "which the model prefers the other word.")
