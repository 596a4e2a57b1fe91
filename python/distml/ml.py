"""distml's classical estimators on NumPy arrays, with scikit-learn's conventions.

Every rank passes its own rows; fit() and score() are collective over the group (the world by
default) and fit the same model as `distml fit` on the same rows; predict() is local.

    import numpy as np, distml, distml.ml
    distml.init()
    X, y = my_shard()                                   # this rank's rows
    model = distml.ml.LogisticRegression(C=1.0).fit(X, y)
    print(model.score(X, y))                            # accuracy over every rank's rows

Options are distml's (`distml fit --set KEY=VALUE`, docs/classical_ml.md), passed as keyword
arguments; get_params() and set_params() return and change them.
"""
import numpy as _np

import distml
from distml import _distml


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _label_texts(y):
    """Labels as the file readers see them: integers as integer text, others as str()."""
    y = _np.asarray(y)
    if y.ndim != 1:
        raise distml.UsageError(f"y must be 1-d, not {y.ndim}-d")
    if _np.issubdtype(y.dtype, _np.integer) or _np.issubdtype(y.dtype, _np.bool_):
        return [str(int(v)) for v in y]
    if _np.issubdtype(y.dtype, _np.floating):
        return [str(int(v)) if float(v).is_integer() else repr(float(v)) for v in y]
    return [str(v) for v in y]


class Estimator:
    """One of distml's estimators by name (`distml fit`'s names); the named classes below
    fix it."""

    name = None

    def __init__(self, name=None, group=None, **params):
        self.name = name or self.name
        if self.name not in _distml.estimator_names():
            raise distml.ConfigError(f"unknown estimator {self.name!r}: one of "
                                     f"{', '.join(_distml.estimator_names())}")
        self.group = group
        self._params = dict(params)
        self._model = None

    def get_params(self, deep=True):
        return dict(self._params)

    def set_params(self, **params):
        self._params.update(params)
        return self

    def _comm(self):
        return self.group if self.group is not None else distml.world()

    def _fitted(self):
        if self._model is None:
            raise distml.UsageError(f"this {type(self).__name__} is not fitted: call fit() first")
        return self._model

    def fit(self, X, y=None):
        """Collective: every rank passes its own rows X (rows x features) and labels y."""
        model = _distml.Estimator(self.name)
        for key, value in self._params.items():
            model.set(key, _text(value))
        labels = None if y is None else _label_texts(y)
        names = model.fit(self._comm(), X, labels)
        if names:
            y = _np.asarray(y)
            numeric = _np.issubdtype(y.dtype, _np.number) or _np.issubdtype(y.dtype, _np.bool_)
            self.classes_ = _np.array(names).astype(y.dtype if numeric else object)
        self.n_features_in_ = _np.shape(X)[1]
        self.n_iter_ = model.iterations
        self._model = model
        return self

    def predict(self, X):
        """This rank's rows' classes (cluster ids for k-means, values for regression)."""
        model = self._fitted()
        if model.regression:
            return model.predict_values(X)
        ids = model.predict(X)
        return self.classes_[ids] if hasattr(self, "classes_") else ids

    def predict_proba(self, X):
        """Rows x classes probabilities, the columns in classes_' order."""
        return self._fitted().predict_proba(X)

    def score(self, X, y=None):
        """Collective: accuracy over every rank's rows (R^2 for regression, minus the inertia
        for k-means), as scikit-learn's score."""
        labels = None if y is None else _label_texts(y)
        return self._fitted().score(self._comm(), X, labels)

    def to_json(self):
        """The fitted model as `distml fit --model-out` writes it (without preprocessing)."""
        return self._fitted().to_json()


def _named(class_name, estimator, doc):
    return type(class_name, (Estimator,), {
        "__doc__": doc,
        "__init__": lambda self, group=None, **params: Estimator.__init__(
            self, estimator, group, **params),
    })


KMeans = _named("KMeans", "kmeans", "k-means (k=..., init, max_iter, ...).")
LogisticRegression = _named("LogisticRegression", "logistic_regression",
                            "Multinomial logistic regression (C, max_iter, tol, ...).")
LinearSVC = _named("LinearSVC", "linear_svc", "Linear SVM, one-vs-rest (C, max_iter, ...).")
GaussianNB = _named("GaussianNB", "gaussian_nb", "Gaussian naive Bayes.")
MultinomialNB = _named("MultinomialNB", "multinomial_nb", "Multinomial naive Bayes (alpha).")
GradientBoosting = _named("GradientBoosting", "gbdt",
                          "Gradient-boosted trees (n_estimators, max_depth, learning_rate, ...; "
                          "loss=squared_error for regression).")
RandomForest = _named("RandomForest", "random_forest",
                      "Random forest (n_estimators, max_depth, ...; criterion=squared_error "
                      "for regression).")
GaussianMixture = _named("GaussianMixture", "gaussian_mixture",
                         "Gaussian mixture by EM (n_components, ...).")
