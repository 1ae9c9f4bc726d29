"""Train a sentiment_analysis package on your own labelled reviews.

    taskflow train sentiment_analysis --train my.csv --dev my_dev.csv \\
        --text-field review --label-field stars --out my_model/
    # then: Taskflow("sentiment_analysis", task_path="my_model/")

This is text_classification's trainer with this task's name: the same file formats, options
and small char CNN (see ``taskflow train text_classification --help``).  Labels are the file's
own ("1".."5" stars, or names); a file labelled 0/1 gives the labels negative/positive, as the
bundled model's.
"""

from __future__ import annotations

import sys

from taskflow.recipe_command import recipe_parser
from taskflow.tasks.text_classification.train import (SMALL_DATA, add_network_options, add_own_data_training,
                                                      check_network_options, train_own_data)

__all__ = ["sentiment_labels", "parse_args", "main"]


def sentiment_labels(found: list[str]) -> list[str]:
    """A file labelled 0/1 trains the labels negative/positive, as the bundled model's."""
    return ["negative", "positive"] if found == ["0", "1"] else found


def parse_args(argv: list[str]):
    parser = recipe_parser("sentiment_analysis", __doc__, data=None, name=None)
    add_own_data_training(parser)
    add_network_options(parser, **SMALL_DATA)
    if any(arg == "--data-dir" or arg.startswith("--data-dir=") for arg in argv):
        parser.error("taskflow train sentiment_analysis trains on your own labelled file: give --train FILE "
                     "(and --dev FILE), not --data-dir")
    args = parser.parse_args(argv)
    if not args.train:
        parser.error("--train FILE is required: sentiment_analysis trains on your own labelled file")
    check_network_options(parser, args)
    return args


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    return train_own_data(parse_args(argv), "sentiment_analysis", argv, label_names=sentiment_labels)


if __name__ == "__main__":
    sys.exit(main())
