"""A systematic residual of a framework profile's validation, stated with the profile
(``FrameworkProfile.validation_flags``) and printed with the estimates it applies to."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainplan.spec.base import Spec


class ValidationFlag(Spec):
    """A systematic residual of the validation, for the layouts it applies to: printed with an
    estimate whose strategy has ``strategy.<field> >= min``. The figures in ``text`` are checked
    against the published runs by tests/unit/validation/test_validation_flags.py."""

    field: Literal["tp", "cp", "pp", "ep", "zero", "offload_optimizer"]
    min: int = Field(ge=1)
    text: str
    rows: str = Field(description="which published runs the figure is the median over: "
                      "'all' (calibration and validation) or 'validation'")
    median_error: float = Field(description="the median signed error (predicted/reported - 1) "
                                "of those runs, as stated in text")

    def applies(self, strategy) -> bool:
        return int(getattr(strategy, self.field)) >= self.min
