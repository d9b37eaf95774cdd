"""Training: config, schedules, batching, the loop, checkpoints, evaluation and plots.

    from glassformer.train import TrainConfig, train, load_checkpoint
    result = train(TrainConfig(task="zh-en", out="runs/zh-en", max_minutes=4))
"""

from .checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from .config import TrainConfig
from .loop import TrainingDiverged, TrainResult, train

__all__ = ["Checkpoint", "load_checkpoint", "save_checkpoint", "TrainConfig", "TrainingDiverged",
           "TrainResult", "train"]
