"""simtlab's version (what a stored run records), in a module of its own so that nothing below the
package's front door has to import the package."""

__version__ = "0.1.0"
