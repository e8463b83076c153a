"""Matplotlib figures: Gantt chart, memory over time, bubble bars, memory–makespan Pareto front.

One function per figure.  Each takes an optional ``ax`` (a new figure, sized for the data, is
created when it is None) and returns the :class:`~matplotlib.axes.Axes` it drew on, so figures
compose (see :func:`gantt_and_memory`).  Nothing here calls ``plt.show``; everything works
with the non-interactive Agg backend.  :func:`save_figure` writes any of them to a file.

==================  ===========================================================
module              holds
==================  ===========================================================
``style``           colours per kind, shades per chunk, palettes, number format
``layout``          new axes, sizes in points, fitting labels into blocks
``gantt_chart``     :func:`gantt`, :func:`gantt_figsize`
``memory_chart``    :func:`memory`
``study``           :func:`bubble_bars`, :func:`pareto` (many schedules at once)
``io``              :func:`save_figure`, :func:`gantt_and_memory`
==================  ===========================================================

Conventions shared by the figures:

* **Time** is in the instance's own units (the numbers of the instance file), x axis.
* **Devices** (pipeline ranks) are rows of the Gantt chart, rank 0 on top.
* **Colour = kind** of action, from the colour-blind-safe Okabe–Ito palette: ``F`` blue,
  ``B`` vermillion, ``I`` bluish green, ``W`` reddish purple.
* **Shade = chunk**.  A device holds ``v`` stages (``pipeline.stages_per_device`` in the
  instance file); each is one of its *chunks*, and the word "chunk" is used for them in every
  figure.  An action's chunk is the local index of its stage on its device (``loop``:
  ``stage // p``; ``v``: 0 for ``stage < p``, else 1); chunk 0 is the darkest, the last chunk
  the lightest.  With ``bidirectional`` placement (DualPipe) the shade is the *direction*
  instead: dark for microbatches ``0..m/2-1``, light for the others.
"""

from cpsched.plots.gantt_chart import gantt, gantt_figsize
from cpsched.plots.io import gantt_and_memory, save_figure
from cpsched.plots.memory_chart import memory
from cpsched.plots.study import bubble_bars, pareto
from cpsched.plots.style import KIND_COLORS, block_color, chunk_of

__all__ = [
    "KIND_COLORS",
    "block_color",
    "bubble_bars",
    "chunk_of",
    "gantt",
    "gantt_and_memory",
    "gantt_figsize",
    "memory",
    "pareto",
    "save_figure",
]
