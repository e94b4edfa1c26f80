;;; e2e_lib.el --- what every Emacs e2e script of tests/editors shares  -*- lexical-binding: t; -*-

;; Loaded by each script (`load' next to it): the observations it writes as JSON to
;; $SYNCONFROUTE_E2E_RESULT for tests/test_editors.py, and a bounded wait on the server.

;;; Code:

(require 'json)

(defvar e2e-out nil "Alist of observations, written as JSON.")
(defvar e2e-step "start")
(defvar e2e-wait-seconds 20 "How long `e2e-wait' waits by default.")
(defvar e2e-poll-seconds 0.05 "How often `e2e-wait' asks its predicate.")

(defun e2e-put (key value)
  (push (cons key value) e2e-out))

(defun e2e-finish (err)
  (e2e-put "error" err)
  (e2e-put "step" e2e-step)
  (with-temp-file (getenv "SYNCONFROUTE_E2E_RESULT")
    (insert (json-encode e2e-out)))
  (kill-emacs 0))

(defun e2e-wait (what pred &optional seconds)
  "Process input until PRED returns non-nil (its value), or fail after SECONDS."
  (setq e2e-step what)
  (let ((deadline (+ (float-time) (or seconds e2e-wait-seconds)))
        value)
    (while (not (setq value (funcall pred)))
      (when (> (float-time) deadline)
        (error "Timed out waiting for %s" what))
      (accept-process-output nil e2e-poll-seconds))
    value))

(provide 'e2e_lib)
;;; e2e_lib.el ends here
