;;; synconfroute.el --- AI completion, local first -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: languages, tools, convenience

;;; Commentary:

;; Registers the synconfroute language server (`synconfroute serve') with
;; eglot.  Each completion comes from a model on this machine when it is
;; confident and keeps the file syntactically valid, and from the
;; organisation's large model otherwise.
;;
;;   (require 'synconfroute)
;;   (setq synconfroute-command
;;         '("~/synconfroute/.venv/bin/synconfroute" "serve"))
;;   (synconfroute-setup)
;;
;; Then M-x eglot in a Python, Java, C/C++, JavaScript/TypeScript, Go or
;; Rust buffer.  Completions show as ghost text after point (as you type
;; when `synconfroute-inline-auto' is on; M-x synconfroute-inline asks
;; now): TAB takes it, M-<right> its next word, C-M-<right> its next line,
;; C-g hides it.  They also go through `completion-at-point' (C-M-i).  The
;; route of the completion (local or remote, and why) shows in the mode line
;; and the echo area, and through eldoc on the lines it inserted (and,
;; before that, as eglot's hover); M-x synconfroute-toggle-local-only keeps
;; all code on this machine; M-x synconfroute-status tells which tiers are
;; in use.
;;
;; eglot runs one server per buffer: in `synconfroute-modes' synconfroute
;; replaces the language's usual server (pylsp, clangd...).  Leave a mode
;; out to keep its server.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'eglot)
(require 'eldoc)
(require 'url-parse)
(require 'url-util)

(defgroup synconfroute nil
  "Private AI code completion: local model first, remote model when needed."
  :group 'tools
  :prefix "synconfroute-")

(defcustom synconfroute-command '("synconfroute" "serve")
  "Program and arguments that start the language server.
Use the full path when the program is not on `exec-path', for example
\\='(\"~/synconfroute/.venv/bin/synconfroute\" \"serve\")."
  :type '(repeat string))

(defcustom synconfroute-modes
  '(python-mode python-ts-mode java-mode java-ts-mode c-mode c-ts-mode
    c++-mode c++-ts-mode js-mode js-ts-mode typescript-mode typescript-ts-mode
    go-mode go-ts-mode rust-mode rust-ts-mode)
  "Major modes whose buffers `synconfroute-setup' gives to synconfroute."
  :type '(repeat symbol))

(defcustom synconfroute-settings nil
  "Server settings sent as initializationOptions, a plist of sections.
The keys are those of docs/settings.md, for example
  (:local (:backend \"ollama\" :model \"qwen2.5-coder:3b\")
   :remote (:url \"http://gpu-cluster:8000/v1\"
            :model \"Qwen/Qwen2.5-Coder-32B-Instruct\")
   :routing (:threshold -0.5))
Use t and :json-false for booleans.  Per project, set
`eglot-workspace-configuration' to (:synconfroute (...)) in .dir-locals.el;
the server treats those as workspace settings, which may only tighten what
leaves the machine (a server URL there is refused)."
  :type 'sexp)

(defcustom synconfroute-inline-auto t
  "Non-nil: ask for ghost text whenever typing pauses in a managed buffer."
  :type 'boolean)

(defcustom synconfroute-inline-delay 0.2
  "Seconds of idle time after typing before ghost text is asked for."
  :type 'number)

(defcustom synconfroute-cursor-delay 0.15
  "Seconds the cursor must rest before the server is told where it is.
The server then evaluates the local model's prompt for that position in the
background, so the next completion there starts warm.  Also sent when a
buffer becomes managed.  nil: never."
  :type '(choice number (const :tag "Never" nil)))

(defface synconfroute-ghost '((t :inherit shadow))
  "Face of the ghost text (the completion offered after point).")

(defvar synconfroute-last-route nil
  "One line saying how the last completion was routed.")

(defvar synconfroute-route nil
  "The last `synconfroute/route' notification, a plist.
Its keys: :uri :id :route :reasons :confidence :threshold :cacheHit
:summary :card :range.  The server sends one per completion, just before
the completion itself.")

(defvar synconfroute--routes (make-hash-table :test #'equal)
  "Completion id -> its route notification (the last few).")

(defclass synconfroute-server (eglot-lsp-server) ()
  :documentation "The synconfroute language server.")

(defun synconfroute--initialization-options ()
  "`synconfroute-settings' ready for JSON ({} when unset)."
  (or synconfroute-settings (make-hash-table)))

(cl-defmethod eglot-initialization-options ((_server synconfroute-server))
  (synconfroute--initialization-options))

(cl-defmethod eglot-handle-notification
  ((_server synconfroute-server) (_method (eql synconfroute/route)) &rest params)
  "Keep the route of a completion, sent by the server as data (PARAMS)."
  (synconfroute--note-route params))

(defun synconfroute--note-route (params)
  "Record PARAMS, a `synconfroute/route' notification."
  (when (stringp (plist-get params :summary))
    (setq synconfroute-route params
          synconfroute-last-route (plist-get params :summary))
    (when-let ((id (plist-get params :id)))
      (when (> (hash-table-count synconfroute--routes) 64)
        (clrhash synconfroute--routes))
      (puthash id params synconfroute--routes))
    (force-mode-line-update t)))

(defun synconfroute-route-string (&optional route)
  "ROUTE (default `synconfroute-route') for a mode line.
For example \"synconfroute: local -0.05\"; \" (cache)\" follows when the
cache answered."
  (let ((r (or route synconfroute-route)))
    (if (not (stringp (plist-get r :route)))
        ""
      (let ((conf (plist-get r :confidence)))
        (format "synconfroute: %s%s%s" (plist-get r :route)
                (if (numberp conf) (format " %.2f" conf) "")
                (if (synconfroute--json-true (plist-get r :cacheHit)) " (cache)" ""))))))

(defun synconfroute--card-text (card)
  "The text of CARD: a string, or a MarkupContent plist."
  (cond ((stringp card) card)
        ((consp card) (plist-get card :value))))

(defun synconfroute--contact (&optional _interactive)
  "The eglot contact for synconfroute: class and command."
  (unless (and (consp synconfroute-command)
               (stringp (car synconfroute-command)))
    (user-error
     "synconfroute: `synconfroute-command' must be a list of strings"))
  (let ((program (car synconfroute-command)))
    (unless (or (file-name-absolute-p program) (executable-find program))
      (user-error
       (concat "synconfroute: `%s' not found on exec-path; install "
               "synconfroute (bash scripts/setup.sh) and set "
               "`synconfroute-command' to "
               "(\"/path/to/.venv/bin/synconfroute\" \"serve\")")
       program)))
  (cons 'synconfroute-server
        (mapcar (lambda (s) (if (string-prefix-p "~" s) (expand-file-name s) s))
                synconfroute-command)))

(defconst synconfroute--language-ids
  '(("c++" . "cpp") ("js" . "javascript"))
  "LSP language ids that differ from the major mode's name.")

(defun synconfroute--mode-spec (mode)
  "MODE with the LSP language id eglot should announce for it."
  (let* ((name (replace-regexp-in-string "\\(-ts\\)?-mode\\'" ""
                                         (symbol-name mode)))
         (id (or (cdr (assoc name synconfroute--language-ids)) name)))
    (list mode :language-id id)))

;;;###autoload
(defun synconfroute-setup ()
  "Register synconfroute with eglot for `synconfroute-modes'."
  (interactive)
  (setq eglot-server-programs
        (cons (cons (mapcar #'synconfroute--mode-spec synconfroute-modes)
                    #'synconfroute--contact)
              (cl-remove #'synconfroute--contact eglot-server-programs
                         :key #'cdr)))
  (add-hook 'eglot-managed-mode-hook #'synconfroute--managed))

(defun synconfroute--server ()
  "The synconfroute server of this buffer, or an error saying what to do."
  (let ((server (eglot-current-server)))
    (unless (cl-typep server 'synconfroute-server)
      (user-error (concat "synconfroute: no synconfroute server manages "
                          "this buffer; M-x eglot first")))
    server))

;;; Completion

(defun synconfroute--uri-file (uri)
  "The file name of URI, a file:// URI, as `file-truename' gives it."
  (when (and (stringp uri) (string-prefix-p "file://" uri))
    (file-truename (url-unhex-string (url-filename (url-generic-parse-url uri))))))

(defun synconfroute--route-here ()
  "The last route notification, if it is about this buffer's file."
  (let ((r synconfroute-route))
    (and r buffer-file-name
         (equal (synconfroute--uri-file (plist-get r :uri))
                (file-truename buffer-file-name))
         r)))

(defvar-local synconfroute--last nil
  "(START END CARD): markers around the last completion taken, its route card.")

(defun synconfroute--accepted (server id)
  "Tell SERVER that the completion ID was taken (it records it with its route)."
  (when (stringp id)
    (jsonrpc-async-request server :workspace/executeCommand
                           (list :command "synconfroute.accept" :arguments (vector id))
                           :success-fn #'ignore
                           :error-fn #'ignore)))

(defun synconfroute--taken (server route start end)
  "The completion of ROUTE (a route notification) went between START and END:
show its route, tell SERVER."
  (let ((summary (plist-get route :summary)))
    (when (stringp summary)
      (setq synconfroute-last-route summary)
      (message "%s" summary))
    (setq synconfroute--last
          (list (copy-marker start) (copy-marker end t)
                (synconfroute--card-text (plist-get route :card))))
    (synconfroute--accepted server (plist-get route :id))))

(defun synconfroute-completion-at-point ()
  "eglot's `completion-at-point', telling the server what was taken."
  (when-let* ((capf (eglot-completion-at-point)))
    (pcase-let* ((`(,beg ,end ,table . ,props) capf)
                 (server (eglot-current-server))
                 (exit (plist-get props :exit-function))
                 (start (copy-marker beg)))
      (append
       (list beg end table)
       (plist-put (copy-sequence props) :exit-function
                  (lambda (proxy status)
                    ;; The route came as data just before the completion: the one
                    ;; offered, since the server offers one at a time.
                    (let ((route (synconfroute--route-here)))
                      (when exit (funcall exit proxy status))
                      (when (and route (memq status '(finished exact)))
                        (synconfroute--taken server route start (point))))))))))

;;; Ghost text

(defvar-local synconfroute--ghost nil
  "The completion shown after point: (OVERLAY TEXT ID SERVER ACCEPTED END).
END is the buffer position up to which the whole text replaces (point
when it replaces nothing).")

(defvar-local synconfroute--ghost-tick nil
  "`buffer-chars-modified-tick' while the ghost text applies.")

(defvar-local synconfroute--timer nil "Idle timer of the next automatic request.")
(defvar-local synconfroute--request 0 "Number of the latest ghost text request.")

(defun synconfroute-next-word (text)
  "The next word of TEXT, as VS Code's Accept Word takes it.
Spaces then a run of word characters or of punctuation; a line break with
the next line's indentation alone."
  (cond ((string= text "") "")
        ((string-match (concat "\\`\\(?:\n[ \t]*\\|[ \t]*[[:alnum:]_]+"
                               "\\|[ \t]*[^ \t\n[:alnum:]_]+\\|[ \t]+\\)")
                       text)
         (match-string 0 text))
        (t (substring text 0 1))))

(defun synconfroute-next-line (text)
  "The next line of TEXT: up to its line break; at one, it and the line after."
  (if (string-prefix-p "\n" text)
      (concat "\n" (car (split-string (substring text 1) "\n")))
    (car (split-string text "\n"))))

(defun synconfroute--lsp-position ()
  "Point as an LSP position, in the column units eglot uses."
  (list :line (1- (line-number-at-pos nil t))
        :character (cond ((boundp 'eglot-current-linepos-function)
                          (funcall (symbol-value 'eglot-current-linepos-function)))
                         ((boundp 'eglot-current-column-function)
                          (funcall (symbol-value 'eglot-current-column-function)))
                         (t (- (point) (line-beginning-position))))))

(defun synconfroute--uri ()
  "This buffer's URI, as eglot sends it (public `eglot-path-to-uri' when the
eglot has it, 1.16 on; before, its internal one)."
  (let ((file (file-truename buffer-file-name)))
    (if (fboundp 'eglot-path-to-uri)
        (funcall 'eglot-path-to-uri file)
      (funcall 'eglot--path-to-uri file))))

(defun synconfroute--point-of (pos)
  "The buffer position of POS, an LSP position."
  (save-excursion
    (goto-char (point-min))
    (forward-line (plist-get pos :line))
    (let ((col (plist-get pos :character)))
      (cond ((boundp 'eglot-move-to-linepos-function)
             (funcall (symbol-value 'eglot-move-to-linepos-function) col))
            ((boundp 'eglot-move-to-column-function)
             (funcall (symbol-value 'eglot-move-to-column-function) col))
            (t (move-to-column col))))
    (point)))

(defvar synconfroute-ghost-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "TAB") #'synconfroute-accept)
    (define-key map (kbd "<tab>") #'synconfroute-accept)
    (define-key map (kbd "M-<right>") #'synconfroute-accept-word)
    (define-key map (kbd "C-M-<right>") #'synconfroute-accept-line)
    (define-key map (kbd "C-g") #'synconfroute-dismiss)
    map)
  "Keys active while ghost text is shown.")

(define-minor-mode synconfroute--ghost-mode
  "Active while ghost text is shown: `synconfroute-ghost-map'."
  :lighter nil
  :keymap synconfroute-ghost-map)

(defun synconfroute--render (ov text)
  "Show TEXT as ghost text at OV, the cursor before it."
  (let ((str (propertize text 'face 'synconfroute-ghost)))
    (when (> (length str) 0)
      (put-text-property 0 1 'cursor t str))
    (overlay-put ov 'after-string str)))

(defun synconfroute-dismiss ()
  "Hide the ghost text."
  (interactive)
  (when synconfroute--ghost
    (delete-overlay (car synconfroute--ghost))
    (setq synconfroute--ghost nil))
  (synconfroute--ghost-mode -1))

(defun synconfroute--show (server item)
  "Show ITEM, an InlineCompletionItem from SERVER, as ghost text at point."
  (synconfroute-dismiss)
  (let* ((text (plist-get item :insertText))
         (text (if (stringp text) text (plist-get text :value)))
         (command (plist-get item :command))
         (id (let ((args (plist-get command :arguments)))
               (and (> (length args) 0) (elt args 0))))
         (range (plist-get item :range))
         (end (if range
                  (max (point) (synconfroute--point-of (plist-get range :end)))
                (point))))
    (when (and (stringp text) (> (length text) 0))
      (let ((ov (make-overlay (point) (point) nil nil t)))
        (overlay-put ov 'synconfroute t)
        (overlay-put ov 'priority 100)
        (synconfroute--render ov text)
        (setq synconfroute--ghost (list ov text id server nil (copy-marker end))
              synconfroute--ghost-tick (buffer-chars-modified-tick))
        (synconfroute--ghost-mode 1)))))

(defun synconfroute-inline (&optional automatic)
  "Ask the server for a completion at point and show it as ghost text.
AUTOMATIC: asked by the idle timer (the server may debounce it)."
  (interactive)
  (let* ((server (synconfroute--server))
         (buffer (current-buffer))
         (tick (buffer-chars-modified-tick))
         (pos (point))
         (n (setq synconfroute--request (1+ synconfroute--request)))
         (params (list :textDocument (list :uri (synconfroute--uri))
                       :position (synconfroute--lsp-position)
                       :context (list :triggerKind (if automatic 2 1)))))
    ;; The server must have the buffer as it is now: send eglot's pending changes
    ;; (it has no public function for that; without it, the request waits for them).
    (when (fboundp 'eglot--signal-textDocument/didChange)
      (funcall 'eglot--signal-textDocument/didChange))
    (jsonrpc-async-request
     server :textDocument/inlineCompletion params
     :deferred :textDocument/inlineCompletion
     :success-fn
     (lambda (result)
       (when (buffer-live-p buffer)
         (with-current-buffer buffer
           ;; Too late when the user typed on or moved.
           (when (and (= n synconfroute--request)
                      (= tick (buffer-chars-modified-tick))
                      (= pos (point)))
             (let* ((items (if (vectorp result) result (plist-get result :items))))
               (when (> (length items) 0)
                 (synconfroute--show server (elt items 0))))))))
     :error-fn
     (lambda (err)
       (unless (eq (plist-get err :code) -32800)
         (message "synconfroute: %s" (plist-get err :message)))))))

(defun synconfroute--accept (how)
  "Insert HOW (all, word or line) of the ghost text; nil when none is shown."
  (pcase synconfroute--ghost
    (`(,ov ,text ,id ,server ,accepted ,end)
     (let* ((piece (pcase how
                     ('word (synconfroute-next-word text))
                     ('line (synconfroute-next-line text))
                     (_ text)))
            (rest (substring text (length piece)))
            (start (overlay-start ov)))
       (goto-char start)
       (when (and (string= rest "") (> end start))
         (delete-region start end))   ; the whole text replaces what its range covers
       (insert piece)
       (unless accepted
         (setf (nth 4 synconfroute--ghost) t)
         (synconfroute--accepted server id)
         (let ((route (gethash id synconfroute--routes)))
           (when route
             (setq synconfroute-route route
                   synconfroute-last-route (plist-get route :summary)))))
       (let ((route (gethash id synconfroute--routes)))
         (when route
           (pcase synconfroute--last
             ;; Parts of one completion: the card covers all of them.
             (`(,s ,_ ,_ ,(pred (equal id)))
              (setq synconfroute--last
                    (list s (copy-marker (point) t)
                          (synconfroute--card-text (plist-get route :card)) id)))
             (_ (setq synconfroute--last
                      (list (copy-marker start) (copy-marker (point) t)
                            (synconfroute--card-text (plist-get route :card)) id))))))
       (setq synconfroute--ghost-tick (buffer-chars-modified-tick))
       (if (string= rest "")
           (synconfroute-dismiss)
         (move-overlay ov (point) (point))
         (setf (nth 1 synconfroute--ghost) rest)
         (synconfroute--render ov rest))
       t))))

(defun synconfroute-accept ()
  "Take the ghost text."
  (interactive)
  (synconfroute--accept 'all))

(defun synconfroute-accept-word ()
  "Take the next word of the ghost text."
  (interactive)
  (synconfroute--accept 'word))

(defun synconfroute-accept-line ()
  "Take the next line of the ghost text."
  (interactive)
  (synconfroute--accept 'line))

(defconst synconfroute--typing-commands
  '(self-insert-command newline newline-and-indent electric-newline-and-maybe-indent
    delete-backward-char backward-delete-char-untabify python-indent-dedent-line-backspace)
  "Commands after which ghost text is asked for (`synconfroute-inline-auto').")

(defun synconfroute--post-command ()
  "Drop the ghost text once the buffer changed or point left it; after
typing, ask again when Emacs is idle; report where the cursor rests."
  (synconfroute--cursor-moved)
  (when (and synconfroute--ghost
             (or (/= (point) (overlay-start (car synconfroute--ghost)))
                 (/= (buffer-chars-modified-tick) synconfroute--ghost-tick)))
    (synconfroute-dismiss))
  (when (and synconfroute-inline-auto
             (memq this-command synconfroute--typing-commands))
    (when synconfroute--timer
      (cancel-timer synconfroute--timer))
    (let ((buffer (current-buffer)))
      (setq synconfroute--timer
            (run-with-idle-timer
             synconfroute-inline-delay nil
             (lambda ()
               (when (buffer-live-p buffer)
                 (with-current-buffer buffer
                   (setq synconfroute--timer nil)
                   (when (and (eglot-managed-p)
                              (cl-typep (eglot-current-server) 'synconfroute-server))
                     (synconfroute-inline t))))))))))

;;; Where the cursor rests (the server prefills its prompt there)

(defvar synconfroute--cursor-timer nil
  "Idle timer that reports the resting cursor (one for all buffers: only the
selected one's cursor counts).")

(defvar synconfroute--cursor-reported nil
  "(BUFFER POINT TICK) of the last `synconfroute/cursor' sent.")

(defun synconfroute--ours-p ()
  "Non-nil when synconfroute's server manages this buffer."
  (and buffer-file-name (eglot-managed-p)
       (cl-typep (eglot-current-server) 'synconfroute-server)))

(defun synconfroute--report-cursor ()
  "Tell this buffer's server where the cursor is (`synconfroute/cursor')."
  (setq synconfroute--cursor-timer nil)
  (let ((state (list (current-buffer) (point) (buffer-chars-modified-tick))))
    (when (and (synconfroute--ours-p)
               (not (equal state synconfroute--cursor-reported)))
      (setq synconfroute--cursor-reported state)
      ;; The server must have the text the position is in (eglot sends changes late).
      (when (fboundp 'eglot--signal-textDocument/didChange)
        (funcall 'eglot--signal-textDocument/didChange))
      (jsonrpc-notify (eglot-current-server) :synconfroute/cursor
                      (list :textDocument (list :uri (synconfroute--uri))
                            :position (synconfroute--lsp-position))))))

(defun synconfroute--cursor-moved ()
  "Report the cursor once Emacs has been idle `synconfroute-cursor-delay'.
An idle timer fires once per idle period: moving on keeps it waiting."
  (when (and synconfroute-cursor-delay (null synconfroute--cursor-timer)
             (not (equal (list (current-buffer) (point) (buffer-chars-modified-tick))
                         synconfroute--cursor-reported)))
    (setq synconfroute--cursor-timer
          (run-with-idle-timer synconfroute-cursor-delay nil
                               #'synconfroute--report-cursor))))

;;; Route in eldoc

(defun synconfroute-eldoc-function (callback)
  "Call CALLBACK with the route card while point is on the last completion."
  (pcase synconfroute--last
    (`(,start ,end ,card . ,_)
     (when (and card (marker-buffer start)
                (<= (save-excursion (goto-char start) (line-beginning-position))
                    (point)
                    (save-excursion (goto-char end) (line-end-position))))
       (funcall callback card :echo synconfroute-last-route)
       t))))

(defconst synconfroute--mode-line
  '(:eval (when (and (eglot-managed-p)
                     (cl-typep (eglot-current-server) 'synconfroute-server))
            (concat (synconfroute-route-string) " ")))
  "The route of the last completion, in `mode-line-misc-info'.")

(defun synconfroute--managed ()
  "Use synconfroute's completion and eldoc functions where it is the server."
  (if (and (eglot-managed-p)
           (cl-typep (eglot-current-server) 'synconfroute-server))
      (progn
        (remove-hook 'completion-at-point-functions
                     #'eglot-completion-at-point t)
        (add-hook 'completion-at-point-functions
                  #'synconfroute-completion-at-point nil t)
        (add-hook 'eldoc-documentation-functions
                  #'synconfroute-eldoc-function nil t)
        (add-hook 'post-command-hook #'synconfroute--post-command nil t)
        (add-to-list 'mode-line-misc-info synconfroute--mode-line)
        (synconfroute--cursor-moved))
    (remove-hook 'completion-at-point-functions
                 #'synconfroute-completion-at-point t)
    (remove-hook 'eldoc-documentation-functions
                 #'synconfroute-eldoc-function t)
    (remove-hook 'post-command-hook #'synconfroute--post-command t)
    (synconfroute-dismiss)))


;;; Commands

(defun synconfroute--json-true (value)
  "Non-nil when VALUE is JSON true (not nil, not :json-false)."
  (and value (not (eq value :json-false))))

(defun synconfroute-format-status (status)
  "One line from STATUS, the plist the server's synconfroute.status returns."
  (let ((routes (plist-get status :routes))
        (last (plist-get status :last)))
    (format (concat "synconfroute: local %s; remote %s; local-only %s; "
                    "%s completions (%s local, %s remote, %s none), "
                    "%s taken; last: %s")
            (plist-get status :local) (plist-get status :remote)
            (if (synconfroute--json-true (plist-get status :local_only))
                "on" "off")
            (plist-get status :completions)
            (plist-get routes :local) (plist-get routes :remote)
            (plist-get routes :none)
            (plist-get status :accepted)
            (if (stringp last) last "-"))))

(defun synconfroute-status ()
  "Show the tiers the server uses and how completions were routed.
Returns the status plist."
  (interactive)
  (let ((status (eglot-execute-command (synconfroute--server)
                                       'synconfroute.status [])))
    (message "%s" (synconfroute-format-status status))
    status))

(defun synconfroute-toggle-local-only ()
  "Toggle local-only (no code leaves this machine).  Returns the new state."
  (interactive)
  (let ((on (synconfroute--json-true
             (eglot-execute-command (synconfroute--server)
                                    'synconfroute.toggleLocalOnly []))))
    (message "synconfroute: local-only %s"
             (if on "ON: nothing leaves this machine" "off"))
    on))

;;; Next-edit suggestions

(defun synconfroute-next-edit ()
  "Ask the server for the edit after the one just made, near point; apply it.
The server answers `textDocument/copilotInlineEdit' with at most one edit
\(routed like a completion); applying it runs the edit's command, which
records the acceptance.  Returns the edit's route summary when one was
applied, nil otherwise."
  (interactive)
  (let ((server (synconfroute--server)))
    ;; The server answers for the version it has: send eglot's pending changes first.
    (when (fboundp 'eglot--signal-textDocument/didChange)
      (funcall 'eglot--signal-textDocument/didChange))
    (let* ((version (if (boundp 'eglot--versioned-identifier)
                        (symbol-value 'eglot--versioned-identifier)
                      0))
           (result (jsonrpc-request
                    server :textDocument/copilotInlineEdit
                    (list :textDocument (list :uri (synconfroute--uri) :version version)
                          :position (synconfroute--lsp-position))))
           (edits (plist-get result :edits)))
      (if (= (length edits) 0)
          (progn (message "synconfroute: no next edit here") nil)
        (let* ((item (elt edits 0))
               (range (plist-get item :range))
               (start (synconfroute--point-of (plist-get range :start)))
               (end (synconfroute--point-of (plist-get range :end)))
               (command (plist-get item :command)))
          (jsonrpc-notify server :textDocument/didShowInlineEdit (list :item item))
          (save-excursion
            (goto-char start)
            (delete-region start end)
            (insert (plist-get item :text)))
          (jsonrpc-async-request server :workspace/executeCommand
                                 (list :command (plist-get command :command)
                                       :arguments (plist-get command :arguments))
                                 :success-fn #'ignore
                                 :error-fn #'ignore)
          (message "%s" (plist-get command :title))
          (plist-get command :title))))))

(provide 'synconfroute)
;;; synconfroute.el ends here
